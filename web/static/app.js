// Cubicle's operator page: the workspace list and a live view (noVNC).
// Auth is the HttpOnly cookie the gateway set when the page was opened with
// ?token=..., so this script never sees the token.
//
// The live view is view-only until "Take over". That flag is only for the
// page's manners: the gateway drops input from anyone who does not hold the
// control lock, whatever a client sends. Who holds it comes from the
// gateway's Server-Sent Events stream, so every viewer sees changes at once.
// The same stream says when the workspace is paused: the view greys out and
// takes no input (the gateway refuses it anyway) until it is resumed.
import RFB from '/assets/novnc/core/rfb.js';

const $ = (selector) => document.querySelector(selector);
let me = null;
let viewing = null; // { id, name }
let viewer = null;
let events = null;
let control = null;
let retry = { timer: null, delay: 1000 };

function status(text, isError = false) {
  const el = $('#status');
  el.textContent = text;
  el.className = isError ? 'error' : '';
}

function viewState(state, text) {
  const el = $('#view-state');
  el.dataset.state = state;
  el.textContent = text;
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  if (response.status === 204) return null;
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const err = new Error(data.error ? data.error.message : response.statusText);
    err.status = response.status;
    throw err;
  }
  return data;
}

function button(label, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.addEventListener('click', onClick);
  return b;
}

function row(ws) {
  const tr = document.createElement('tr');
  tr.dataset.id = ws.id;
  for (const text of [ws.name, ws.state, `${ws.geometry.width}x${ws.geometry.height}`]) {
    const td = document.createElement('td');
    td.textContent = text;
    tr.append(td);
  }
  tr.children[1].className = `state-${ws.state}`;
  if (ws.error) tr.children[1].title = ws.error;
  // The agent called for a person: the row says so until someone takes over.
  if (ws.call) {
    tr.dataset.call = 'waiting';
    const call = document.createElement('div');
    call.className = 'call';
    call.textContent = `needs a person: ${ws.call.reason}`;
    tr.children[0].append(call);
  }
  const actions = document.createElement('td');
  if (ws.state === 'running' || ws.state === 'paused') {
    actions.append(button('View', () => openView(ws)));
  }
  if (ws.state === 'running') actions.append(button('Pause', () => pauseOrResume(ws.id, 'pause')));
  if (ws.state === 'paused') actions.append(button('Resume', () => pauseOrResume(ws.id, 'resume')));
  actions.append(button('Delete', () => remove(ws)));
  tr.append(actions);
  return tr;
}

async function refresh() {
  try {
    const { workspaces } = await api('GET', '/v1/workspaces');
    $('#workspaces tbody').replaceChildren(...workspaces.map(row));
    // `/#ws-…` (what `cubicle ws view` opens) shows that workspace once.
    const asked = decodeURIComponent(location.hash.slice(1));
    const wanted = asked && workspaces.find((ws) => ws.id === asked);
    if (wanted) {
      history.replaceState(null, '', location.pathname);
      openView(wanted);
    }
  } catch (err) {
    status(`cannot list workspaces: ${err.message}`, true);
  }
}

async function remove(ws) {
  if (!confirm(`Delete workspace ${ws.name}? Its files are removed.`)) return;
  if (viewing && viewing.id === ws.id) closeView();
  status(`deleting ${ws.name}…`);
  try {
    await api('DELETE', `/v1/workspaces/${ws.id}`);
    status(`deleted ${ws.name}`);
  } catch (err) {
    status(err.message, true);
  }
  refresh();
}

async function pauseOrResume(id, verb) {
  status(verb === 'pause' ? 'pausing…' : 'resuming…');
  try {
    const ws = await api('POST', `/v1/workspaces/${id}/${verb}`);
    status(`${ws.name} is ${ws.state}`);
  } catch (err) {
    status(err.message, true);
  }
  refresh();
}

// --- control lock -----------------------------------------------------------

function holdsControl() {
  return Boolean(me && control && control.holder.kind === 'operator' && control.holder.token_id === me.id);
}

function renderControl() {
  const el = $('#holder');
  const mine = holdsControl();
  if (!control) {
    el.textContent = '';
    el.dataset.holder = '';
  } else if (control.holder.kind === 'agent') {
    el.textContent = 'The agent has control';
    el.dataset.holder = 'agent';
  } else {
    const since = new Date(control.since_ms).toLocaleTimeString();
    const who = mine ? 'You have' : `${control.holder.name} (${control.holder.role}) has`;
    el.textContent = `${who} control since ${since}`;
    el.dataset.holder = `operator:${control.holder.name}`;
  }
  el.dataset.mine = String(mine);
  el.className = mine ? 'mine' : '';
  // The agent's call for a person, until an operator takes over.
  const call = $('#call');
  const asked = control && control.call;
  call.hidden = !asked;
  call.textContent = asked ? `${asked.by} asks for a person: ${asked.reason}` : '';
  const may = (permission) => Boolean(me && me.permissions.includes(permission));
  const canHold = may('control_hold');
  const paused = Boolean(control && control.paused);
  $('#view-pane').dataset.paused = String(paused);
  const toggle = $('#pause');
  toggle.textContent = paused ? 'Resume' : 'Pause';
  toggle.disabled = !control || !may('workspaces_manage');
  $('#take').disabled = !canHold || !control || mine || control.holder.kind !== 'agent';
  $('#release').disabled = !canHold || !control || control.holder.kind === 'agent'
    || (!mine && !may('control_override'));
  if (viewer) {
    viewer.viewOnly = !mine || paused;
    if (mine && !paused) viewer.focus();
  }
  const shown = $('#view-state').dataset.state;
  if (paused && (shown === 'live' || shown === 'paused' || shown === 'waiting')) {
    viewState('paused', 'paused: no input until resumed');
  } else if (viewer && (shown === 'live' || shown === 'paused')) {
    viewState('live', mine ? 'live (you have control)' : 'live (view only)');
  }
}

function followControl() {
  if (events) events.close();
  control = null;
  renderControl();
  events = new EventSource(`/v1/workspaces/${viewing.id}/control/events`);
  events.addEventListener('control', (e) => {
    control = JSON.parse(e.data);
    renderControl();
  });
}

async function changeControl(verb) {
  if (!viewing) return;
  try {
    control = await api('POST', `/v1/workspaces/${viewing.id}/control/${verb}`);
    renderControl();
  } catch (err) {
    status(err.message, true);
  }
}

// --- live view --------------------------------------------------------------

function openView(ws) {
  closeView();
  viewing = { id: ws.id, name: ws.name };
  $('#view-pane').hidden = false;
  // Panels of the viewed workspace (shares.js) follow this.
  $('#view-pane').dataset.workspace = ws.id;
  // The clipboard panel, for those whose token may use clipboards.
  $('#clipboard-pane').hidden = !(me && me.permissions && me.permissions.includes('clipboard'));
  $('#clipboard-status').textContent = '';
  $('#view-title').textContent = ws.name;
  followControl();
  connect();
}

function connect() {
  if (!viewing) return;
  clearTimeout(retry.timer);
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const url = `${scheme}://${location.host}/v1/workspaces/${viewing.id}/vnc`;
  viewState('connecting', 'connecting');
  const rfb = new RFB($('#screen'), url);
  viewer = rfb;
  rfb.viewOnly = !holdsControl();
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.addEventListener('connect', () => {
    retry.delay = 1000;
    viewState('live', 'live');
    renderControl();
  });
  rfb.addEventListener('disconnect', () => {
    if (viewer !== rfb) return; // closed on purpose
    viewer = null;
    scheduleReconnect();
  });
}

// Reconnects with backoff, unless the reason is one that waiting cannot fix.
async function scheduleReconnect() {
  if (!viewing) return;
  const id = viewing.id;
  try {
    const ws = await api('GET', `/v1/workspaces/${id}`);
    if (ws.state === 'paused') {
      viewState('paused', 'paused: the view returns when it is resumed');
    } else if (ws.state !== 'running') {
      viewState('waiting', `workspace is ${ws.state}; retrying`);
    }
  } catch (err) {
    if (err.status === 401) {
      viewState('closed', 'closed: token revoked or invalid (open /?token=… again)');
      if (events) events.close();
      return;
    }
    if (err.status === 404) {
      viewState('closed', 'closed: workspace deleted');
      return;
    }
  }
  if (!viewing || viewing.id !== id) return;
  const seconds = Math.round(retry.delay / 1000);
  if (!['waiting', 'paused'].includes($('#view-state').dataset.state)) {
    viewState('reconnecting', `connection lost, reconnecting in ${seconds}s`);
  }
  retry.timer = setTimeout(connect, retry.delay);
  retry.delay = Math.min(retry.delay * 2, 10000);
}

function closeView() {
  clearTimeout(retry.timer);
  viewing = null;
  const rfb = viewer;
  viewer = null;
  if (rfb) rfb.disconnect();
  if (events) events.close();
  events = null;
  control = null;
  $('#view-pane').hidden = true;
  viewState('closed', 'disconnected');
}

// The desktop's clipboard, read and set through the API (the policy's
// clipboard rules judge both; an agent's set is refused during a take-over,
// an operator's is not).
async function clipboard(verb) {
  if (!viewing) return;
  const path = `/v1/workspaces/${viewing.id}/clipboard`;
  const said = $('#clipboard-status');
  try {
    const answer = verb === 'read' ? await api('GET', path) : await api('PUT', path, { text: $('#clipboard-text').value });
    // 202: a rule holds it for a person (the same request again, once
    // approved, goes through).
    if (answer && answer.error) {
      said.textContent = answer.error.message;
      said.className = 'held';
      return;
    }
    if (verb === 'read') {
      $('#clipboard-text').value = answer.text;
      said.textContent = `read ${answer.text.length} characters`;
    } else {
      said.textContent = 'set: Ctrl+V in the workspace pastes it';
    }
    said.className = '';
  } catch (err) {
    said.textContent = err.message;
    said.className = 'error';
  }
}

$('#clipboard-read').addEventListener('click', () => clipboard('read'));
$('#clipboard-set').addEventListener('click', () => clipboard('set'));
$('#take').addEventListener('click', () => changeControl('take'));
$('#release').addEventListener('click', () => changeControl('release'));
$('#close-view').addEventListener('click', closeView);
$('#pause').addEventListener('click', () => {
  if (viewing) pauseOrResume(viewing.id, control && control.paused ? 'resume' : 'pause');
});
$('#create').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const body = { geometry: form.get('geometry') };
  // A browser profile of the caller's, by name (made empty the first time).
  const profile = form.get('profile').trim();
  if (profile) body.profile = profile;
  status('creating a workspace (the desktop takes a few seconds)…');
  try {
    const ws = await api('POST', '/v1/workspaces', body);
    status(`created ${ws.name}`);
    await refresh();
    openView(ws);
  } catch (err) {
    status(err.message, true);
    refresh();
  }
});

async function start() {
  try {
    me = await api('GET', '/v1/me');
    $('#me').textContent = `${me.name} (${me.role})`;
  } catch (err) {
    status(`cannot tell who you are: ${err.message}`, true);
  }
  renderControl();
  refresh();
  setInterval(refresh, 5000);
}

start();
