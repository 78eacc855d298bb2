// The Webhooks panel of the operator page: the signed deliveries of events
// to other systems (README "Webhooks"). It lists the subscriptions the
// token may manage (an admin's: everyone's), each with its event kinds, its
// workspace (or all the token sees) and its last delivery; adds one (the
// signing secret is shown once, right after); removes one. Polled every few
// seconds so a delivery's outcome shows up.
//
// What a token may subscribe to is the gateway's rule; the page shows its
// refusals as they come.

import { $, api, el } from './panel.js';

let me = null;
let shown = '';

/// The last delivery, in a line: when, which event, and how it went.
function last(w) {
  const l = w.last;
  if (!l) return el('p', { class: 'last', 'data-last': 'none' }, 'nothing delivered yet');
  const when = new Date(l.at_ms).toLocaleTimeString();
  const how = l.ok ? `delivered (${l.status})` : `failed${l.status ? ` (${l.status})` : ''}: ${l.error || ''} · attempt ${l.attempt}`;
  return el('p', { class: 'last', 'data-last': l.ok ? 'ok' : 'failed' }, `${when} · ${l.kind} · ${how}`);
}

function row(w) {
  const error = el('p', { class: 'error', role: 'alert' });
  const remove = el('button', { type: 'button', class: 'remove' }, 'Remove');
  remove.onclick = async () => {
    if (!confirm(`Stop delivering to ${w.url}?`)) return;
    remove.disabled = true;
    try {
      await api('DELETE', `/v1/webhooks/${w.id}`);
      await refresh();
    } catch (err) {
      error.textContent = err.message;
      remove.disabled = false;
    }
  };
  return el('li', { class: 'webhook', 'data-id': w.id },
    el('div', { class: 'what' }, el('code', { class: 'url' }, w.url), ' ', remove),
    el('p', { class: 'kinds' }, w.kinds.join(', '), ' · ',
      el('span', { class: 'scope' }, w.workspace ? `workspace ${w.workspace}` : 'every workspace it may see')),
    last(w),
    error);
}

// Refreshes by the order they were sent: the newest answer shown so far
// (a slow timer refresh must not put back what an action's later one took
// away).
let sent = 0;
let applied = 0;

async function refresh() {
  const mine = ++sent;
  let webhooks;
  try {
    ({ webhooks } = await api('GET', '/v1/webhooks'));
  } catch {
    return;
  }
  if (mine < applied) return;
  applied = mine;
  $('#webhooks-count').textContent = webhooks.length ? `(${webhooks.length})` : '';
  // Redraw only on change, so nothing being read jumps.
  const key = JSON.stringify(webhooks.map((w) => [w.id, w.last]));
  if (key === shown) return;
  shown = key;
  $('#webhooks-list').replaceChildren(...webhooks.map(row));
}

async function add(event) {
  event.preventDefault();
  const form = event.target;
  const kinds = form.kinds.value.split(',').map((k) => k.trim()).filter(Boolean);
  const body = { url: form.url.value.trim(), kinds };
  if (form.workspace.value.trim()) body.workspace = form.workspace.value.trim();
  $('#webhooks-error').textContent = '';
  $('#webhooks-secret').hidden = true;
  try {
    const made = await api('POST', '/v1/webhooks', body);
    $('#webhooks-secret-value').textContent = made.secret;
    $('#webhooks-secret').hidden = false;
    form.url.value = '';
    await refresh();
  } catch (err) {
    $('#webhooks-error').textContent = err.message;
  }
}

async function start() {
  try {
    me = await api('GET', '/v1/me');
  } catch {
    return;
  }
  if (!(me.permissions || []).includes('webhooks_manage')) return;
  $('#webhooks-pane').hidden = false;
  $('#webhooks-form').addEventListener('submit', add);
  await refresh();
  setInterval(refresh, 2000);
}

start();
