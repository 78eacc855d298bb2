// Cubicle's operator page: the workspace list and a live view (noVNC).
// Auth is the HttpOnly cookie the gateway set when the page was opened with
// ?token=..., so this script never sees the token.
import RFB from '/assets/novnc/core/rfb.js';

const $ = (selector) => document.querySelector(selector);
let viewer = null;
let viewing = null;

function status(text, isError = false) {
  const el = $('#status');
  el.textContent = text;
  el.className = isError ? 'error' : '';
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  if (response.status === 204) return null;
  const data = await response.json();
  if (!response.ok) throw new Error(data.error ? data.error.message : response.statusText);
  return data;
}

function row(ws) {
  const tr = document.createElement('tr');
  const cells = [ws.name, ws.state, `${ws.geometry.width}x${ws.geometry.height}`];
  for (const text of cells) {
    const td = document.createElement('td');
    td.textContent = text;
    tr.append(td);
  }
  tr.children[1].className = `state-${ws.state}`;
  if (ws.error) tr.children[1].title = ws.error;
  const actions = document.createElement('td');
  if (ws.state === 'running') actions.append(button('View', () => openView(ws)));
  actions.append(button('Delete', () => remove(ws)));
  tr.append(actions);
  return tr;
}

function button(label, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.addEventListener('click', onClick);
  return b;
}

async function refresh() {
  try {
    const { workspaces } = await api('GET', '/v1/workspaces');
    $('#workspaces tbody').replaceChildren(...workspaces.map(row));
  } catch (err) {
    status(`cannot list workspaces: ${err.message}`, true);
  }
}

async function remove(ws) {
  if (viewing === ws.id) closeView();
  status(`deleting ${ws.name}…`);
  try {
    await api('DELETE', `/v1/workspaces/${ws.id}`);
    status(`deleted ${ws.name}`);
  } catch (err) {
    status(err.message, true);
  }
  refresh();
}

function openView(ws) {
  closeView();
  viewing = ws.id;
  $('#view-pane').hidden = false;
  $('#view-title').textContent = ws.name;
  connect();
}

function connect() {
  if (!viewing) return;
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const url = `${scheme}://${location.host}/v1/workspaces/${viewing}/vnc`;
  $('#view-state').textContent = 'connecting';
  viewer = new RFB($('#screen'), url);
  viewer.viewOnly = true;
  viewer.scaleViewport = true;
  viewer.addEventListener('connect', () => { $('#view-state').textContent = 'live (view only)'; });
  viewer.addEventListener('disconnect', (e) => {
    viewer = null;
    $('#view-state').textContent = e.detail.clean ? 'disconnected' : 'connection lost, reconnecting';
    if (viewing && !e.detail.clean) setTimeout(connect, 2000);
  });
}

function closeView() {
  viewing = null;
  if (viewer) viewer.disconnect();
  viewer = null;
  $('#view-pane').hidden = true;
}

$('#close-view').addEventListener('click', closeView);
$('#create').addEventListener('submit', async (event) => {
  event.preventDefault();
  const geometry = new FormData(event.target).get('geometry');
  status('creating a workspace (the desktop takes a few seconds)…');
  try {
    const ws = await api('POST', '/v1/workspaces', { geometry });
    status(`created ${ws.name}`);
    await refresh();
    openView(ws);
  } catch (err) {
    status(err.message, true);
    refresh();
  }
});

refresh();
setInterval(refresh, 5000);
