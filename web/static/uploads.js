// The Upload pane of the live view (README "Uploads into the browser"): an
// operator hands a file to a file input of the page on the viewed
// workspace's screen — a file from this computer, or one of the
// workspace's released downloads — into the field a CSS selector names
// (the focused one without it), through `POST /v1/workspaces/{id}/upload`.
//
// The answer is shown plainly: uploaded (the name, size, SHA-256 and the
// page's origin); held by the policy until another operator approves it
// (the gateway never lets the asker decide its own), then sent again by
// itself once approved — the pane waits on the approval
// (`GET /v1/approvals/{id}?wait=`) and sends with `approval=<id>`; or the
// gateway's refusal in its own words (the scan's rule, no file input
// there, denied by whom and why). A refusal leaves the file chosen, so it
// can be sent again.

import { $, api, el, size } from './panel.js';

/// The largest file the gateway takes (the guest keeps at most 16 MiB).
const MAX_BYTES = 16 * 1024 * 1024;
/// How long one wait on an approval asks the gateway to hold the answer
/// (it allows up to 300 s; shorter keeps a stalled connection short).
const WAIT_SECONDS = 60;

let me = null;
let viewing = '';
// The released downloads of the workspace viewed, by id.
const downloads = new Map();
// Each press of Upload is numbered; a later one, Stop waiting or another
// workspace makes an earlier one's answers moot.
let attempt = 0;

const may = (permission) => Boolean(me && me.permissions && me.permissions.includes(permission));
const form = () => $('#uploads-form');

/// Shows where an upload stands: `sending`, `held`, `uploaded`, `stopped`,
/// or `refused` (in the alert line); `parts` are text or elements.
function show(outcome, ...parts) {
  $('#uploads-pane').dataset.outcome = outcome;
  $('#uploads-status').replaceChildren(...(outcome === 'refused' ? [] : parts));
  $('#uploads-error').replaceChildren(...(outcome === 'refused' ? parts : []));
  $('#uploads-stop').hidden = outcome !== 'held';
}

function idle() {
  form().querySelector('button[type="submit"]').disabled = false;
  $('#uploads-stop').hidden = true;
}

/// What is chosen: a released download if one is picked, else the file.
function chosen() {
  const fields = form().elements;
  const download = downloads.get(fields.download.value);
  if (download) {
    return { name: download.name, bytes: download.size, query: { download: download.id }, body: undefined };
  }
  const file = fields.file.files[0];
  if (!file) return null;
  return { name: file.name, bytes: file.size, query: { name: file.name }, body: file };
}

async function send(id, params, body) {
  const response = await fetch(`/v1/workspaces/${encodeURIComponent(id)}/upload?${params}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/octet-stream' },
    body,
  });
  return { status: response.status, data: await response.json().catch(() => ({})) };
}

/// Approval `id` once decided; null when this attempt was given up.
async function decision(id, mine) {
  for (;;) {
    const approval = await api('GET', `/v1/approvals/${encodeURIComponent(id)}?wait=${WAIT_SECONDS}`);
    if (mine !== attempt) return null;
    if (approval.state !== 'pending') return approval;
  }
}

function uploaded(u) {
  return ['uploaded ', el('strong', { class: 'name' }, u.name),
    ` (${size(u.size)}, sha256 `, el('code', { class: 'sha256', title: u.sha256 }, `${u.sha256.slice(0, 12)}…`),
    ') into ', el('code', { class: 'origin', title: u.url }, u.origin)];
}

function held(approval) {
  return [el('strong', {}, 'held: waiting for approval'),
    ` — ${approval.reason} (${approval.rule}). Another operator approves it in Approvals; `
    + 'it is sent again by itself once approved.'];
}

function decided(approval) {
  const why = approval.decision_reason ? `: ${approval.decision_reason}` : '';
  if (approval.state === 'expired') return `not uploaded: the approval expired${why}`;
  const by = approval.decided_by ? approval.decided_by.name : 'an operator';
  return `not uploaded: denied by ${by}${why}`;
}

async function upload() {
  const what = chosen();
  if (!what) {
    show('refused', 'choose a file, or a released download, first');
    return;
  }
  if (what.bytes > MAX_BYTES) {
    show('refused', `${what.name} is ${size(what.bytes)}: an upload is at most ${size(MAX_BYTES)}`);
    return;
  }
  const mine = ++attempt;
  const id = viewing;
  const params = new URLSearchParams(what.query);
  const selector = form().elements.selector.value.trim();
  if (selector) params.set('selector', selector);
  form().querySelector('button[type="submit"]').disabled = true;
  show('sending', `sending ${what.name} (${size(what.bytes)})…`);
  try {
    let answer = await send(id, params, what.body);
    while (mine === attempt && answer.status === 202 && answer.data.approval) {
      const approval = answer.data.approval;
      show('held', ...held(approval));
      const done = await decision(approval.id, mine);
      if (!done) return;
      if (done.state !== 'approved') {
        show('refused', decided(done));
        return;
      }
      show('sending', `approved by ${done.decided_by ? done.decided_by.name : 'an operator'}: sending ${what.name}…`);
      params.set('approval', approval.id);
      answer = await send(id, params, what.body);
    }
    if (mine !== attempt) return;
    if (answer.status === 200) {
      show('uploaded', ...uploaded(answer.data));
      form().elements.file.value = '';
      form().elements.download.value = '';
      form().elements.file.disabled = false;
    } else {
      const error = answer.data.error;
      show('refused', error ? error.message : `not uploaded: the gateway answered ${answer.status}`);
    }
  } catch (err) {
    if (mine === attempt) show('refused', `not uploaded: ${err.message}`);
  } finally {
    if (mine === attempt) idle();
  }
}

function option(d) {
  return el('option', { value: d.id }, `${d.name} (${size(d.size)})`);
}

async function refreshDownloads() {
  if (!viewing || !may('downloads_read')) return;
  const id = viewing;
  let listed;
  try {
    ({ downloads: listed } = await api('GET', `/v1/downloads?workspace=${encodeURIComponent(id)}&state=released`));
  } catch {
    return;
  }
  if (id !== viewing) return;
  const key = listed.map((d) => d.id).join(' ');
  if (key === [...downloads.keys()].join(' ')) return;
  downloads.clear();
  for (const d of listed) downloads.set(d.id, d);
  const select = form().elements.download;
  const picked = select.value;
  select.replaceChildren(select.options[0], ...listed.map(option));
  select.value = downloads.has(picked) ? picked : '';
  form().elements.file.disabled = select.value !== '';
  $('#uploads-downloads').hidden = listed.length === 0;
}

function follow() {
  const next = $('#view-pane').dataset.workspace || '';
  if (next === viewing) return;
  viewing = next;
  attempt += 1;
  idle();
  show('', '');
  downloads.clear();
  const select = form().elements.download;
  select.replaceChildren(select.options[0]);
  form().elements.file.disabled = false;
  $('#uploads-downloads').hidden = true;
  refreshDownloads();
}

form().addEventListener('submit', (event) => {
  event.preventDefault();
  upload();
});

// A download picked stands in for the file (which stays chosen).
form().elements.download.addEventListener('change', (event) => {
  form().elements.file.disabled = event.target.value !== '';
});

$('#uploads-stop').addEventListener('click', () => {
  attempt += 1;
  idle();
  show('stopped', 'stopped waiting: the approval stays asked; press Upload again to pick it up.');
});

$('#uploads-pane').addEventListener('toggle', () => {
  if ($('#uploads-pane').open) refreshDownloads();
});

async function start() {
  try {
    me = await api('GET', '/v1/me');
  } catch {
    return;
  }
  if (!may('browser')) return;
  $('#uploads-pane').hidden = false;
  new MutationObserver(follow).observe($('#view-pane'), { attributes: true, attributeFilter: ['data-workspace'] });
  follow();
  setInterval(() => {
    if ($('#uploads-pane').open) refreshDownloads();
  }, 5000);
}

start();
