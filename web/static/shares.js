// The Share pane of the live view (README "Share links"): an operator
// makes a link for a person without a token (view only, or view and take
// control; for how long), sees the link once, lists the workspace's links
// (live, expired, revoked) and revokes one.

import { $, api, el } from './panel.js';

let workspace = '';
let sent = 0;
let applied = 0;

function row(share) {
  const until = new Date(share.revoked_at_ms ?? share.expires_at_ms).toLocaleString();
  const when = share.state === 'live' ? `until ${until}` : `at ${until}`;
  const item = el('li', { 'data-id': share.id, 'data-state': share.state },
    `${share.mode} `, el('span', { class: 'state' }, share.state), ` ${when} `);
  if (share.state === 'live') {
    const revoke = el('button', { type: 'button', class: 'revoke' }, 'Revoke');
    revoke.addEventListener('click', async () => {
      try {
        await api('DELETE', `/v1/workspaces/${workspace}/shares/${share.id}`);
        $('#shares-error').textContent = '';
      } catch (err) {
        $('#shares-error').textContent = err.message;
      }
      refresh();
    });
    item.append(revoke);
  }
  return item;
}

async function refresh() {
  if (!workspace) return;
  const asked = ++sent;
  const id = workspace;
  try {
    const { shares } = await api('GET', `/v1/workspaces/${id}/shares`);
    // A later answer was shown already, or another workspace is viewed.
    if (asked < applied || id !== workspace) return;
    applied = asked;
    $('#shares-list').replaceChildren(...shares.map(row));
    const live = shares.filter((s) => s.state === 'live').length;
    $('#shares-count').textContent = live ? `(${live} live)` : '';
  } catch (err) {
    $('#shares-error').textContent = err.message;
  }
}

function follow() {
  const next = $('#view-pane').dataset.workspace || '';
  if (next === workspace) return;
  workspace = next;
  $('#shares-list').replaceChildren();
  $('#shares-made').hidden = true;
  $('#shares-url').value = '';
  $('#shares-error').textContent = '';
  refresh();
}

$('#shares-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  try {
    const made = await api('POST', `/v1/workspaces/${workspace}/share`, {
      mode: form.get('mode'),
      expires_in_s: Number(form.get('expires')),
    });
    $('#shares-url').value = `${location.origin}${made.url}`;
    $('#shares-made').hidden = false;
    $('#shares-error').textContent = '';
  } catch (err) {
    $('#shares-error').textContent = err.message;
  }
  refresh();
});

async function start() {
  try {
    const me = await api('GET', '/v1/me');
    if (!me.permissions.includes('shares_manage')) return;
  } catch {
    return;
  }
  $('#shares-pane').hidden = false;
  new MutationObserver(follow).observe($('#view-pane'), { attributes: true, attributeFilter: ['data-workspace'] });
  follow();
  setInterval(refresh, 5000);
}

start();
