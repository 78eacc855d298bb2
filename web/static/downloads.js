// The Downloads panel of the operator page: files the egress proxy held in
// quarantine instead of letting them into a workspace. Each row shows the
// workspace, the cleaned file name, its size, the type sniffed from its
// bytes (and the one the server claimed), its SHA-256 and the YARA rules
// that matched, with Release (into the workspace's ~/Downloads, never
// executable) and Reject, each with a reason. Polled every few seconds.
//
// Deciding is the gateway's rule (operators and admins); the page only
// hides buttons that would be refused.

import { $, api, el } from './panel.js';

let me = null;
let shown = '';

const may = (permission) => Boolean(me && me.permissions && me.permissions.includes(permission));

function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function row(d) {
  const hits = d.hits.length
    ? el('ul', { class: 'hits' }, ...d.hits.map((h) => el('li', { 'data-rule': h.rule, title: h.description || '' },
      el('strong', {}, h.rule), h.severity ? ` (${h.severity})` : '')))
    : el('span', { class: 'clean' }, 'no rule matched');
  const reason = el('input', { class: 'reason', placeholder: 'reason', maxLength: 1000 });
  const error = el('p', { class: 'error', role: 'alert' });
  const decide = (verb) => async () => {
    for (const b of node.querySelectorAll('button')) b.disabled = true;
    try {
      await api('POST', `/v1/downloads/${d.id}/${verb}`, reason.value ? { reason: reason.value } : undefined);
      await refresh();
    } catch (err) {
      error.textContent = err.message;
      for (const b of node.querySelectorAll('button')) b.disabled = false;
    }
  };
  const actions = d.state === 'held' && may('downloads_decide')
    ? el('div', { class: 'decide' }, reason,
      el('button', { type: 'button', class: 'release', onclick: decide('release') }, 'Release'),
      el('button', { type: 'button', class: 'reject', onclick: decide('reject') }, 'Reject'))
    : el('p', { class: 'state' }, d.state === 'held' ? 'held: an operator decides'
      : `${d.state}${d.released_path ? ` to ${d.released_path}` : ''}${d.reason ? ` — ${d.reason}` : ''}`);
  const name = may('downloads_content') && d.state !== 'rejected'
    ? el('a', { href: `/v1/downloads/${d.id}/content`, download: d.name }, d.name)
    : el('span', {}, d.name);
  const node = el('li', { class: 'download', 'data-id': d.id, 'data-state': d.state },
    el('div', { class: 'what' }, el('strong', { class: 'name' }, name), ' ',
      el('span', { class: 'size' }, size(d.size)), ' ',
      el('span', { class: 'type', title: `claimed: ${d.claimed_type || 'none'}` }, d.sniffed_type || 'unknown type')),
    el('p', { class: 'where' }, `${d.workspace} · `, el('code', { class: 'url' }, d.url)),
    el('p', { class: 'hash' }, 'sha256 ', el('code', { class: 'sha256' }, d.sha256)),
    hits,
    actions,
    error);
  return node;
}

// Refreshes by the order they were sent: the newest answer shown so far
// (a slow timer refresh must not put back what an action's later one took
// away).
let sent = 0;
let applied = 0;

async function refresh() {
  const mine = ++sent;
  let downloads;
  try {
    ({ downloads } = await api('GET', '/v1/downloads'));
  } catch {
    return;
  }
  if (mine < applied) return;
  applied = mine;
  const recent = downloads.filter((d) => d.state === 'held' || Date.now() - (d.decided_at_ms || 0) < 10 * 60 * 1000);
  // Redraw only on change, so a reason being typed is kept.
  const key = JSON.stringify(recent.map((d) => [d.id, d.state]));
  if (key === shown) return;
  shown = key;
  $('#downloads-list').replaceChildren(...recent.map(row));
  const held = downloads.filter((d) => d.state === 'held').length;
  $('#downloads-pane').hidden = recent.length === 0;
  $('#downloads-count').textContent = held ? `${held} held` : '';
}

async function start() {
  try {
    me = await api('GET', '/v1/me');
  } catch {
    return;
  }
  if (!may('downloads_read')) return;
  await refresh();
  setInterval(refresh, 2000);
}

start();
