// Snapshots in the operator page (README "Snapshots"). Two places:
// - the Snapshots panel of the list: the token's snapshots (an admin's:
//   everyone's), each with what it holds, a count and a Start button that
//   makes that many new workspaces from it in one call, and Remove;
// - the Snapshots pane of the live view: Take a snapshot of the workspace
//   viewed (by name), and its snapshots, each with Roll back (after a
//   confirm: the workspace's files and browser profile — or, for a
//   microVM's `memory` snapshot, its whole machine — are put back as they
//   were, and what was made since is gone).
// The gateway's refusals are shown where the button was.

import { $, api, el, size } from './panel.js';

let me = null;
let viewing = '';
// The newest list, and refreshes by the order they were sent.
let snapshots = [];
let sent = 0;
let applied = 0;
// Rows of the panel drawn, by snapshot id: kept while unchanged, so a
// count typed or a refusal shown stays through the timer's refreshes.
const drawn = new Map();

// What a snapshot holds: a microVM's whole machine (`memory`), or the
// user's files and browser profile (`disk`).
function holds(s) {
  const parts = s.kind === 'memory' && s.machine
    ? `memory: the whole machine, ${size(s.machine.memory_bytes)} of ${size(s.machine.memory_size)} RAM written, disk ${size(s.machine.disk_bytes)}`
    : `${s.kind}: files ${size(s.home_size)}, browser profile ${size(s.profile_size)}`;
  return `${parts}; of ${s.workspace_id}, ${new Date(s.created_at_ms).toLocaleString()}`;
}

// What a rollback to `s` does to the workspace viewed.
function rollbackEffect(s) {
  return s.kind === 'memory'
    ? 'Its machine is replaced by the snapshot\'s (memory, programs, disk); what was done since is gone.'
    : 'Its files and browser profile become the snapshot\'s; what was made since is gone.';
}

function panelRow(s) {
  const error = el('p', { class: 'error', role: 'alert' });
  const count = el('input', {
    type: 'number', min: 1, max: 10, value: 1, name: 'count', size: 3,
    'aria-label': `how many workspaces to start from ${s.name}`,
  });
  const start = el('button', { type: 'button', class: 'start' }, 'Start');
  start.onclick = async () => {
    start.disabled = true;
    error.textContent = '';
    $('#snapshots-started').textContent = `starting ${count.value} from ${s.name}…`;
    try {
      const made = await api('POST', '/v1/workspaces', { from_snapshot: s.id, count: Number(count.value) });
      const ids = made.workspaces.map((w) => w.id);
      const failed = made.failed.map((f) => f.message ?? JSON.stringify(f));
      $('#snapshots-started').textContent = `started from ${s.name}: ${ids.join(', ') || 'none'}`
        + (failed.length ? `; failed: ${failed.join('; ')}` : '');
      $('#snapshots-started').dataset.started = ids.join(' ');
    } catch (err) {
      $('#snapshots-started').textContent = '';
      error.textContent = err.message;
    } finally {
      start.disabled = false;
    }
  };
  const remove = el('button', { type: 'button', class: 'remove' }, 'Remove');
  remove.onclick = async () => {
    if (!confirm(`Remove snapshot ${s.name}? Workspaces started from it keep what they have.`)) return;
    remove.disabled = true;
    error.textContent = '';
    try {
      await api('DELETE', `/v1/snapshots/${s.id}`);
      await refresh();
    } catch (err) {
      error.textContent = err.message;
      remove.disabled = false;
    }
  };
  const owner = me && s.owner_token !== me.id ? ` of token ${s.owner_token}` : '';
  return el('li', { class: 'snapshot', 'data-id': s.id, 'data-name': s.name },
    el('div', { class: 'what' }, el('strong', { class: 'name' }, s.name), owner, ' ', el('code', {}, s.id)),
    el('p', { class: 'holds' }, holds(s)),
    el('div', { class: 'actions' }, count, ' ', start, ' ', remove),
    error);
}

function viewRow(s) {
  const rollback = el('button', { type: 'button', class: 'rollback' }, 'Roll back');
  rollback.onclick = async () => {
    if (!confirm(`Roll ${viewing} back to ${s.name}? ${rollbackEffect(s)}`)) return;
    const id = viewing;
    rollback.disabled = true;
    $('#view-snapshots-error').textContent = '';
    $('#view-snapshots-status').textContent = `rolling back to ${s.name}…`;
    try {
      await api('POST', `/v1/workspaces/${id}/rollback`, { snapshot: s.id });
      $('#view-snapshots-status').textContent = `rolled back to ${s.name}`;
    } catch (err) {
      $('#view-snapshots-status').textContent = '';
      $('#view-snapshots-error').textContent = err.message;
    } finally {
      rollback.disabled = false;
    }
  };
  return el('li', { 'data-id': s.id, 'data-name': s.name },
    el('strong', {}, s.name), ` ${new Date(s.created_at_ms).toLocaleString()} `, rollback);
}

function drawView() {
  const mine = snapshots.filter((s) => s.workspace_id === viewing);
  $('#view-snapshots-count').textContent = mine.length ? `(${mine.length})` : '';
  const list = $('#view-snapshots-list');
  const shown = [...list.children].map((li) => li.dataset.id).join(' ');
  if (shown !== mine.map((s) => s.id).join(' ')) list.replaceChildren(...mine.map(viewRow));
}

async function refresh() {
  // A slower answer to an earlier refresh must not put back what a later
  // one took away.
  const asked = ++sent;
  let listed;
  try {
    ({ snapshots: listed } = await api('GET', '/v1/snapshots'));
  } catch {
    return;
  }
  if (asked < applied) return;
  applied = asked;
  snapshots = listed;
  $('#snapshots-count').textContent = listed.length ? `(${listed.length})` : '';
  const rows = listed.map((s) => {
    const key = JSON.stringify([s.name, s.sha256]);
    const kept = drawn.get(s.id);
    return [s.id, kept && kept.key === key ? kept : { key, node: panelRow(s) }];
  });
  drawn.clear();
  for (const [id, shown] of rows) drawn.set(id, shown);
  const list = $('#snapshots-list');
  const nodes = rows.map(([, shown]) => shown.node);
  if (!(nodes.length === list.children.length && nodes.every((node, i) => list.children[i] === node))) {
    list.replaceChildren(...nodes);
  }
  drawView();
}

function follow() {
  const next = $('#view-pane').dataset.workspace || '';
  if (next === viewing) return;
  viewing = next;
  $('#view-snapshots-status').textContent = '';
  $('#view-snapshots-error').textContent = '';
  drawView();
}

$('#view-snapshots-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.target;
  const name = new FormData(form).get('name');
  const id = viewing;
  const button = form.querySelector('button');
  button.disabled = true;
  $('#view-snapshots-error').textContent = '';
  $('#view-snapshots-status').textContent = `taking ${name} (the browser closes for a moment)…`;
  try {
    const made = await api('POST', `/v1/workspaces/${id}/snapshot`, { name });
    $('#view-snapshots-status').textContent = `took ${made.name}: ${holds(made)}`;
    form.reset();
  } catch (err) {
    $('#view-snapshots-status').textContent = '';
    $('#view-snapshots-error').textContent = err.message;
  } finally {
    button.disabled = false;
  }
  await refresh();
});

async function start() {
  try {
    me = await api('GET', '/v1/me');
  } catch {
    return;
  }
  const permissions = me.permissions || [];
  if (!permissions.includes('workspaces_create')) return;
  $('#snapshots-pane').hidden = false;
  if (permissions.includes('workspaces_manage')) {
    $('#view-snapshots-pane').hidden = false;
    new MutationObserver(follow).observe($('#view-pane'), { attributes: true, attributeFilter: ['data-workspace'] });
    follow();
  }
  await refresh();
  setInterval(refresh, 3000);
}

start();
