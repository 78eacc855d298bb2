// Cubicle's replay page, for auditors: recorded sessions (deleted
// workspaces' too), the video, and the event timeline beside it. Clicking an
// event seeks the video to it; the event at the play head is highlighted.
// The badge is the server running the same check as `cubicle audit verify`
// on a fresh export.
//
// The video is the recording's fragmented MP4 segments (H.264) appended in
// order to one Media Source Extensions buffer, each placed at its offset on
// the timeline the server computed (segments back to back), so the events'
// `video_ms` and the player's clock are the same clock.

const $ = (selector) => document.querySelector(selector);
const player = $('#player');
let loaded = null; // { id, events, segments }
let generation = 0; // so a slow load of an older session is dropped

function status(text, isError = false) {
  const el = $('#status');
  el.textContent = text;
  el.className = isError ? 'error' : '';
}

async function api(path) {
  const response = await fetch(path);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error ? data.error.message : response.statusText);
  return data;
}

const clock = (ms) => {
  const s = Math.max(0, Math.floor(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
};
const wall = (ms) => new Date(ms).toLocaleString();

function sessionRow(rec) {
  const tr = document.createElement('tr');
  tr.dataset.id = rec.workspace;
  for (const text of [rec.name, rec.state, wall(rec.start_ms), clock(rec.duration_ms)]) {
    const td = document.createElement('td');
    td.textContent = text;
    tr.append(td);
  }
  tr.addEventListener('click', () => open(rec.workspace));
  return tr;
}

async function listSessions() {
  try {
    const { recordings } = await api('/v1/recordings');
    $('#sessions tbody').replaceChildren(...recordings.map(sessionRow));
    if (recordings.length === 0) status('nothing recorded yet');
    const wanted = new URLSearchParams(location.search).get('workspace');
    if (wanted) open(wanted);
  } catch (err) {
    status(`cannot list recordings: ${err.message}`, true);
  }
}

// One line per event: when (on the video), what, who, a short detail.
function group(kind) {
  const head = kind.split('.')[0];
  return ['control', 'approval', 'download', 'egress', 'policy', 'recording'].includes(head) ? head : 'other';
}

// What a row is about, in words: the action and where it landed, the
// command, the file, the host and the rule that decided, what was approved
// and who asked. An outcome row says what its `started` row said (the same
// request id), so every row of an operation names its target.
const place = (c) => (Array.isArray(c) ? `(${c.join(', ')})` : '');
// A digest the gateway keeps instead of a text: `{len, sha256}`.
const digestText = (d) => (d && typeof d === 'object' && d.sha256 ? `${d.len} bytes, sha256 ${d.sha256.slice(0, 12)}…` : '');

function actionText(a) {
  const parts = [a.action];
  if (a.coordinate) parts.push(`at ${place(a.coordinate)}`);
  if (a.start_coordinate) parts.push(`from ${place(a.start_coordinate)}`);
  if (a.scroll_direction) parts.push(`${a.scroll_direction}${a.scroll_amount ? ` ×${a.scroll_amount}` : ''}`);
  if (a.text) parts.push(`text (${digestText(a.text) || 'kept as a digest'})`);
  return parts.join(' ');
}

function target(kind, d) {
  if (Array.isArray(d.actions)) return d.actions.map(actionText).join('; ');
  if (Array.isArray(d.argv) && d.argv.length > 0) return d.argv.join(' ');
  if (typeof d.command === 'string') return d.command;
  if (kind.startsWith('egress.') && d.host) {
    const where = `${d.method ? `${d.method} ` : ''}${d.host}${d.port ? `:${d.port}` : ''}${d.path || ''}`;
    if (kind === 'egress.decision') return `${where} ${d.allowed ? 'allowed' : 'denied'} (rule: ${d.rule})`;
    return [where, d.status && `→ ${d.status}`, d.rule && `rule ${d.rule}`].filter(Boolean).join(' ');
  }
  if (kind.startsWith('approval.') || kind.startsWith('policy.')) {
    const asker = d.asked_by && d.asked_by.name ? ` asked by ${d.asked_by.name}` : '';
    const what = [d.operation, d.rule && `(rule ${d.rule})`].filter(Boolean).join(' ');
    const why = d.reason || d.why || d.refused || '';
    return [what + asker, d.scope && `scope ${d.scope}`, why].filter(Boolean).join(' · ');
  }
  if (d.path) return d.path;
  if (d.name && d.sha256) return `${d.name} (sha256 ${String(d.sha256).slice(0, 12)}…)`;
  if (d.url) return d.url;
  if (d.method) return d.method;
  if (d.file) return d.file;
  if (d.reason) return d.reason;
  if (d.message) return d.message;
  return '';
}

function summary(event, started) {
  const own = target(event.kind, event.detail || {});
  if (own || !started) return own;
  const first = target(started.kind, started.detail || {});
  const d = event.detail || {};
  const exit = d.exit_code != null ? `exit ${d.exit_code}` : d.signal != null ? `signal ${d.signal}` : '';
  return [first, exit, d.message].filter(Boolean).join(' · ');
}

function eventItem(event, index, started) {
  const li = document.createElement('li');
  li.dataset.index = index;
  li.dataset.id = event.id;
  li.dataset.kind = event.kind;
  li.dataset.group = group(event.kind);
  li.dataset.outcome = event.outcome || '';
  li.dataset.videoMs = event.video_ms ?? '';
  const t = document.createElement('span');
  t.className = 't';
  t.textContent = event.video_ms == null ? '–' : clock(event.video_ms);
  const what = document.createElement('span');
  what.className = 'what';
  what.textContent = event.outcome && event.outcome !== 'ok' ? `${event.kind} (${event.outcome})` : event.kind;
  const who = document.createElement('span');
  who.className = 'who';
  who.textContent = event.actor ? `${event.actor.name} (${event.actor.role})` : 'cubicle';
  const detail = document.createElement('span');
  detail.className = 'detail';
  detail.textContent = summary(event, started);
  li.title = `${wall(event.at)} · request ${event.request_id || '-'}\n${JSON.stringify(event.detail)}`;
  li.append(t, what, who, detail);
  li.addEventListener('click', () => seek(event));
  return li;
}

function seek(event) {
  if (event.video_ms == null) return;
  player.currentTime = event.video_ms / 1000;
  highlight();
}

function applyFilter() {
  const kind = $('#kind-filter').value;
  for (const li of $('#timeline').children) li.hidden = Boolean(kind) && li.dataset.kind !== kind;
}

// The last event at or before the play head.
function highlight() {
  if (!loaded) return;
  const now = player.currentTime * 1000;
  let current = null;
  for (const li of $('#timeline').children) {
    li.classList.remove('current');
    const at = li.dataset.videoMs === '' ? NaN : Number(li.dataset.videoMs);
    if (!li.hidden && at <= now + 1) current = li;
  }
  if (current) {
    current.classList.add('current');
    current.scrollIntoView({ block: 'nearest' });
  }
  $('#clock').textContent = `${clock(now)} / ${clock(loaded.duration)}`;
}

async function verify(id, gen) {
  const badge = $('#verify');
  badge.dataset.state = 'checking';
  badge.textContent = 'checking…';
  try {
    const report = await api(`/v1/workspaces/${id}/audit/verify`);
    if (gen !== generation) return;
    if (report.ok) {
      badge.dataset.state = 'ok';
      badge.textContent = `verified: ${report.records} records, ${report.segments} segments, ${report.har_entries} HAR entries, signed to seq ${report.checkpointed_seq}`;
    } else {
      badge.dataset.state = 'failed';
      badge.textContent = `NOT verified: ${report.failures[0].message}`;
    }
    badge.title = `key ${report.key}${report.warnings.length ? '\n' + report.warnings.join('\n') : ''}`;
  } catch (err) {
    if (gen !== generation) return;
    badge.dataset.state = 'failed';
    badge.textContent = `cannot verify: ${err.message}`;
  }
}

// Appends every segment to one SourceBuffer at its offset.
async function loadVideo(segments, duration, gen) {
  const source = new MediaSource();
  player.src = URL.createObjectURL(source);
  await new Promise((resolve) => source.addEventListener('sourceopen', resolve, { once: true }));
  const buffer = source.addSourceBuffer('video/mp4; codecs="avc1.640028"');
  buffer.mode = 'segments';
  const appended = () => new Promise((resolve, reject) => {
    buffer.addEventListener('updateend', resolve, { once: true });
    buffer.addEventListener('error', reject, { once: true });
  });
  for (const segment of segments) {
    const response = await fetch(segment.url);
    if (!response.ok) throw new Error(`segment ${segment.file}: ${response.status}`);
    const bytes = await response.arrayBuffer();
    if (gen !== generation) return;
    buffer.timestampOffset = segment.offset_ms / 1000;
    const done = appended();
    buffer.appendBuffer(bytes);
    await done;
  }
  source.duration = duration / 1000;
  source.endOfStream();
}

async function open(id) {
  const gen = ++generation;
  for (const tr of $('#sessions tbody').children) tr.classList.toggle('selected', tr.dataset.id === id);
  status(`loading ${id}…`);
  let view;
  try {
    view = await api(`/v1/workspaces/${id}/recordings`);
  } catch (err) {
    status(`cannot load ${id}: ${err.message}`, true);
    return;
  }
  if (gen !== generation) return;
  loaded = { id, events: view.events, segments: view.segments, duration: view.recording.duration_ms };
  $('#player-pane').hidden = false;
  $('#timeline-pane').hidden = false;
  $('#session-title').textContent = `${view.recording.name} (${view.recording.state})`;
  $('#export').href = `/v1/workspaces/${id}/audit/export`;
  $('#har').href = `/v1/workspaces/${id}/har`;
  const kinds = [...new Set(view.events.map((e) => e.kind))].sort();
  const filter = $('#kind-filter');
  filter.replaceChildren(new Option('all', ''), ...kinds.map((k) => new Option(k, k)));
  // Each operation's `started` row, by request id, for its outcome row.
  const starts = new Map();
  for (const e of view.events) {
    if (e.outcome === 'started' && e.request_id) starts.set(`${e.request_id} ${e.kind}`, e);
  }
  const startOf = (e) => (e.outcome !== 'started' && e.request_id ? starts.get(`${e.request_id} ${e.kind}`) : undefined);
  $('#timeline').replaceChildren(...view.events.map((e, i) => eventItem(e, i, startOf(e))));
  verify(id, gen);
  try {
    await loadVideo(view.segments, view.recording.duration_ms, gen);
    if (gen === generation) status(`${view.segments.length} segments, ${view.events.length} events`);
  } catch (err) {
    status(`cannot play the recording: ${err.message}`, true);
  }
  highlight();
}

$('#kind-filter').addEventListener('change', () => { applyFilter(); highlight(); });
player.addEventListener('timeupdate', highlight);
player.addEventListener('seeked', highlight);
listSessions();
