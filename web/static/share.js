// The share page: one workspace's live view for a person with a share
// link (`/share#<secret>`). The secret stays in the fragment, which the
// browser never sends to the server; the page sends it as a bearer token
// (and as `access_token` on the live view's WebSocket). A view link only
// watches: noVNC sends no input, and the gateway would drop it anyway. A
// control link may take control: from then on its pointer and keys reach
// the desktop, and the agent is held off until it hands back.

import RFB from '/share-assets/novnc/core/rfb.js';

const $ = (selector) => document.querySelector(selector);
const secret = decodeURIComponent(location.hash.slice(1));
let share = null;
let rfb = null;
let holding = false;
let dead = false;

function say(state, text) {
  $('#state').dataset.state = state;
  $('#state').textContent = text;
}

async function api(method, path) {
  const response = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${secret}` },
  });
  const body = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    const err = new Error((body && body.error && body.error.message) || response.statusText);
    err.status = response.status;
    err.code = body && body.error && body.error.code;
    throw err;
  }
  return body;
}

// The link no longer works (revoked, expired): nothing of the workspace stays.
function end(err) {
  dead = true;
  const current = rfb;
  rfb = null;
  if (current) current.disconnect();
  $('#screen').hidden = true;
  $('#screen').replaceChildren();
  $('#take').hidden = true;
  $('#release').hidden = true;
  $('#title').textContent = 'shared workspace';
  say(err.status === 410 ? 'gone' : 'closed', err.message);
}

function watching() {
  if (share.mode === 'view') return say('live', 'watching (view only)');
  if (holding) return say('control', 'you have control: your pointer and keys reach the desktop');
  return say('live', 'watching: take control to use it');
}

function renderButtons() {
  $('#take').hidden = share.mode !== 'control' || holding;
  $('#release').hidden = share.mode !== 'control' || !holding;
}

function connect() {
  if (dead) return;
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const url = `${scheme}://${location.host}/v1/workspaces/${share.workspace}/vnc`
    + `?access_token=${encodeURIComponent(secret)}`;
  const view = new RFB($('#screen'), url);
  rfb = view;
  view.viewOnly = !holding;
  view.scaleViewport = true;
  view.resizeSession = false;
  view.addEventListener('connect', watching);
  view.addEventListener('disconnect', async () => {
    if (rfb !== view) return; // closed on purpose
    rfb = null;
    holding = false;
    renderButtons();
    try {
      await api('GET', `/v1/workspaces/${share.workspace}`);
    } catch (err) {
      if (err.status === 410 || err.status === 401 || err.status === 404) return end(err);
    }
    say('connecting', 'connection lost, reconnecting');
    setTimeout(connect, 2000);
  });
}

async function take() {
  try {
    await api('POST', `/v1/workspaces/${share.workspace}/control/take`);
    holding = true;
    if (rfb) rfb.viewOnly = false;
    renderButtons();
    watching();
  } catch (err) {
    if (err.status === 410) return end(err);
    say('live', `cannot take control: ${err.message}`);
  }
}

async function release() {
  try {
    await api('POST', `/v1/workspaces/${share.workspace}/control/release`);
  } catch (err) {
    if (err.status === 410) return end(err);
  }
  holding = false;
  if (rfb) rfb.viewOnly = true;
  renderButtons();
  watching();
}

async function start() {
  if (!secret) {
    return say('closed', 'this page opens share links: /share#… (ask whoever shares the workspace for one)');
  }
  try {
    share = await api('GET', '/v1/share');
  } catch (err) {
    return end(err);
  }
  $('#title').textContent = `workspace ${share.workspace} (${share.mode} link, until ${new Date(share.expires_at_ms).toLocaleString()})`;
  $('#take').addEventListener('click', take);
  $('#release').addEventListener('click', release);
  renderButtons();
  connect();
}

start();
