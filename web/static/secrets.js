// The Secrets panel of the operator page (README "Host-bound secrets"):
// store a secret for the hosts it may go to, in request headers only or in
// bodies too (its value is typed into a password field, sent once and never
// shown again: the gateway does not give it back), list the token's secrets
// (an admin's: everyone's) and where each goes, give one to a workspace (it
// gets a placeholder, shown here, in its commands' environment when a
// variable is named), remove one.

import { $, api, el } from './panel.js';

let shown = '';
// What this page gave, by secret id: kept across redraws of the list.
const gave = new Map();

/// The workspace the page is looking at, if any (`/#ws-…`).
function current() {
  const hash = location.hash.slice(1);
  return hash.startsWith('ws-') ? hash : '';
}

function showGiven(node, made) {
  node.replaceChildren(`${made.workspace}: placeholder `, el('code', { class: 'placeholder' }, made.placeholder),
    made.env ? ` in $${made.env}` : '');
}

function row(s) {
  const error = el('p', { class: 'error', role: 'alert' });
  const given = el('p', { class: 'given' });
  if (gave.has(s.id)) showGiven(given, gave.get(s.id));
  const remove = el('button', { type: 'button', class: 'remove' }, 'Remove');
  remove.onclick = async () => {
    if (!confirm(`Remove secret ${s.name}? Workspaces holding its placeholder can no longer use it.`)) return;
    remove.disabled = true;
    try {
      await api('DELETE', `/v1/secrets/${s.id}`);
      await refresh();
    } catch (err) {
      error.textContent = err.message;
      remove.disabled = false;
    }
  };
  const give = el('form', { class: 'give' },
    el('input', { name: 'workspace', placeholder: 'workspace id', size: 16, value: current(), 'aria-label': 'give to workspace' }),
    el('input', { name: 'env', placeholder: 'variable (optional)', size: 14, 'aria-label': 'environment variable' }),
    el('button', { type: 'submit' }, 'Give'));
  give.onsubmit = async (event) => {
    event.preventDefault();
    error.textContent = '';
    given.textContent = '';
    const body = { secret: s.id };
    if (give.env.value.trim()) body.env = give.env.value.trim();
    try {
      const workspace = give.workspace.value.trim();
      const made = await api('POST', `/v1/workspaces/${workspace}/secrets`, body);
      gave.set(s.id, { workspace, placeholder: made.placeholder, env: made.env });
      showGiven(given, gave.get(s.id));
    } catch (err) {
      error.textContent = err.message;
    }
  };
  return el('li', { class: 'secret', 'data-id': s.id, 'data-name': s.name },
    el('div', { class: 'what' }, el('strong', { class: 'name' }, s.name), ' ',
      el('code', {}, s.id), ' ', remove),
    el('p', { class: 'hosts' }, 'goes to ', s.hosts.join(', '), ' only'),
    el('p', { class: 'swaps' }, s.body ? 'in request headers and bodies' : 'in request headers only'),
    give, given, error);
}

// Refreshes by the order they were sent: the newest answer shown so far.
let sent = 0;
let applied = 0;

async function refresh() {
  // A slower answer to an earlier refresh (the 3 s timer's, sent before a
  // removal) must not put back what a later one took away.
  const mine = ++sent;
  let secrets;
  try {
    ({ secrets } = await api('GET', '/v1/secrets'));
  } catch {
    return;
  }
  if (mine < applied) return;
  applied = mine;
  $('#secrets-count').textContent = secrets.length ? `(${secrets.length})` : '';
  const key = JSON.stringify(secrets.map((s) => s.id));
  if (key === shown) return;
  shown = key;
  $('#secrets-list').replaceChildren(...secrets.map(row));
}

async function add(event) {
  event.preventDefault();
  const form = event.target;
  const hosts = form.hosts.value.split(',').map((h) => h.trim()).filter(Boolean);
  $('#secrets-error').textContent = '';
  try {
    await api('POST', '/v1/secrets', {
      name: form.name.value.trim(), value: form.value.value, hosts, body: form.body.checked,
    });
    // The value leaves the page with the request and nowhere else.
    form.value.value = '';
    form.name.value = '';
    form.body.checked = false;
    await refresh();
  } catch (err) {
    $('#secrets-error').textContent = err.message;
  }
}

async function start() {
  let me;
  try {
    me = await api('GET', '/v1/me');
  } catch {
    return;
  }
  if (!(me.permissions || []).includes('secrets_manage')) return;
  $('#secrets-pane').hidden = false;
  $('#secrets-form').addEventListener('submit', add);
  await refresh();
  setInterval(refresh, 3000);
}

start();
