// The Browser profiles panel of the operator page: the token's persistent
// browser profiles (an admin's: everyone's), each with the size of its kept
// archive and when it was saved (a workspace saves it when it stops), the
// running workspace using it if any, and a Remove button. A profile in use
// cannot be removed: the gateway's refusal says which workspace to stop,
// and the row shows it. Profiles are made by naming one at create (the
// "Profile" field of the create form).

import { $, api, el, size } from './panel.js';

let me = null;
// Rows drawn, by profile id: kept while what they show is unchanged, so a
// refusal shown in one stays through the timer's refreshes.
const drawn = new Map();

function saved(p) {
  if (p.saved_at_ms === null || p.saved_at_ms === undefined) return 'never saved';
  return `${size(p.size)}, saved ${new Date(p.saved_at_ms).toLocaleString()}`;
}

function row(p) {
  const error = el('p', { class: 'error', role: 'alert' });
  const remove = el('button', { type: 'button', class: 'remove' }, 'Remove');
  remove.onclick = async () => {
    if (!confirm(`Remove browser profile ${p.name}? Its cookies and logins are gone for good.`)) return;
    remove.disabled = true;
    error.textContent = '';
    try {
      await api('DELETE', `/v1/profiles/${p.id}`);
      await refresh();
    } catch (err) {
      error.textContent = err.message;
      remove.disabled = false;
    }
  };
  const owner = me && p.owner_token !== me.id ? ` of token ${p.owner_token}` : '';
  return el('li', { class: 'profile', 'data-id': p.id, 'data-name': p.name, 'data-use': p.running_in ? 'in-use' : 'free' },
    el('div', { class: 'what' }, el('strong', { class: 'name' }, p.name), owner, ' ',
      el('code', {}, p.id), ' ', remove),
    el('p', { class: 'saved' }, saved(p)),
    el('p', { class: 'use' }, p.running_in ? `in use by ${p.running_in}` : 'free'),
    error);
}

// Refreshes by the order they were sent: the newest answer shown so far.
let sent = 0;
let applied = 0;

async function refresh() {
  // A slower answer to an earlier refresh (the 3 s timer's, sent before a
  // removal) must not put back what a later one took away.
  const mine = ++sent;
  let profiles;
  try {
    ({ profiles } = await api('GET', '/v1/profiles'));
  } catch {
    return;
  }
  if (mine < applied) return;
  applied = mine;
  $('#profiles-count').textContent = profiles.length ? `(${profiles.length})` : '';
  const rows = profiles.map((p) => {
    const key = JSON.stringify([p.name, p.size, p.saved_at_ms, p.running_in]);
    const kept = drawn.get(p.id);
    if (kept && kept.key === key) return [p.id, kept];
    return [p.id, { key, node: row(p) }];
  });
  drawn.clear();
  for (const [id, shown] of rows) drawn.set(id, shown);
  const list = $('#profiles-list');
  const nodes = rows.map(([, shown]) => shown.node);
  if (nodes.length === list.children.length && nodes.every((node, i) => list.children[i] === node)) return;
  list.replaceChildren(...nodes);
}

async function start() {
  try {
    me = await api('GET', '/v1/me');
  } catch {
    return;
  }
  if (!(me.permissions || []).includes('workspaces_create')) return;
  $('#profiles-pane').hidden = false;
  await refresh();
  setInterval(refresh, 3000);
}

start();
