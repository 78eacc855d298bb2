// The approvals panel of the operator page: operations a policy held for a
// person, live from the gateway's Server-Sent Events stream. Each card shows
// the workspace, the exact action and its context (browser tab and focused
// field; for a new egress destination, its host, port and the page that
// asked, with Allow once / Allow for this workspace / Deny), who asked and why it was held, the screenshot taken when it was
// asked, and Approve / Deny with a reason. A notice comes with each new one:
// the count in the tab title and a badge in the header.
//
// Deciding is the gateway's rule, not the page's: operators and admins only,
// never the token that asked. The page only hides buttons that would be refused.

import { $, api, el, size } from './panel.js';

const pending = new Map(); // id → approval
let me = null;
const baseTitle = document.title;

function mayDecide(approval) {
  return Boolean(me && me.permissions && me.permissions.includes('approvals_decide')
    && approval.asked_by.id !== me.id);
}

function secondsLeft(approval) {
  return Math.max(0, Math.round((approval.expires_at - Date.now()) / 1000));
}

/// What the action is, in a line a person reads first.
function headline(a) {
  const p = a.params || {};
  switch (a.operation) {
    case 'exec': return `run: ${p.command ?? (p.argv || []).join(' ')}`;
    case 'file.write': return `write file ${p.path}`;
    case 'file.delete': return `delete ${p.path}`;
    case 'action': return p.action === 'type' ? `type ${JSON.stringify(p.text)}` : `${p.action} ${p.text ?? ''} ${p.coordinate ? `at ${p.coordinate.join(',')}` : ''}`.trim();
    case 'cdp': return p.method === 'Page.navigate' ? `navigate to ${p.params && p.params.url}` : `browser: ${p.method}`;
    case 'egress': return `connect to ${p.host}:${p.port}`;
    case 'browser.upload': return `upload ${p.name} (${size(p.size)}) into ${p.origin}`;
    case 'ask': return `the agent asks: ${p.question}`;
    default: return a.operation;
  }
}

/// Where a held egress destination came from: the page that asked (as the
/// request's Referer said), or why that is not known.
function egressContext(a) {
  const p = a.params || {};
  const how = { intercepted: 'HTTPS (intercepted)', tunnel: 'HTTPS tunnel (not intercepted)', http: 'plain HTTP' }[p.mode] || p.mode;
  return el('p', { class: 'context egress' }, `${how} · asked by `,
    p.page ? el('code', { class: 'page' }, p.page)
      : el('span', { class: 'page unknown' }, 'a page the proxy cannot see (a CONNECT tunnel is decided before its requests)'));
}

function card(a) {
  const egress = a.operation === 'egress';
  const context = egress ? egressContext(a) : a.context
    ? el('p', { class: 'context' }, 'in ', el('code', {}, a.context.url || '(no URL)'),
      ' — focus: ', el('strong', { 'data-focus': a.context.focus }, a.context.focus.replace('_', ' ')))
    : a.context_error
      ? el('p', { class: 'context unreadable' }, `browser not readable (${a.context_error}): held to be safe`)
      : null;
  const shot = a.has_screenshot
    ? el('img', { class: 'shot', alt: `the screen when it was asked`, src: `/v1/approvals/${a.id}/screenshot`, loading: 'lazy' })
    : el('p', { class: 'no-shot' }, 'no screenshot');
  const reason = el('input', { class: 'reason', placeholder: 'reason (shown to the agent)', maxLength: 1000 });
  const decide = (verb, scope) => async () => {
    for (const b of node.querySelectorAll('button')) b.disabled = true;
    try {
      await api('POST', `/v1/approvals/${a.id}/${verb}`, scope ? { reason: reason.value, scope } : { reason: reason.value });
    } catch (err) {
      node.querySelector('.error').textContent = err.message;
      for (const b of node.querySelectorAll('button')) b.disabled = false;
    }
  };
  // A new destination: this connection once, or the workspace's
  // allowlist for its lifetime.
  const approve = egress
    ? [el('button', { type: 'button', class: 'approve', onclick: decide('approve', 'once') }, 'Allow once'),
      el('button', { type: 'button', class: 'approve-workspace', onclick: decide('approve', 'workspace') },
        `Allow ${(a.params || {}).allow_rule} for this workspace`)]
    : [el('button', { type: 'button', class: 'approve', onclick: decide('approve') }, 'Approve')];
  const buttons = mayDecide(a)
    ? el('div', { class: 'decide' }, reason, ...approve,
      el('button', { type: 'button', class: 'deny', onclick: decide('deny') }, 'Deny'))
    : el('p', { class: 'wait' }, a.asked_by.id === (me && me.id) ? 'asked by you: another operator decides' : 'waiting for an operator');
  const node = el('li', { class: 'approval', 'data-id': a.id, 'data-operation': a.operation },
    el('div', { class: 'what' }, el('strong', {}, headline(a))),
    el('p', { class: 'who' }, `${a.workspace} · asked by ${a.asked_by.name} (${a.asked_by.role}) · `,
      el('span', { class: 'left', 'data-expires': a.expires_at }, `${secondsLeft(a)} s left`)),
    el('p', { class: 'why' }, `${a.reason} `, el('code', {}, a.rule)),
    context,
    el('details', {}, el('summary', {}, 'exact parameters'), el('pre', {}, JSON.stringify(a.params, null, 2))),
    shot,
    buttons,
    el('p', { class: 'error', role: 'alert' }));
  return node;
}

function render() {
  const list = $('#approvals-list');
  const items = [...pending.values()].sort((x, y) => x.asked_at - y.asked_at);
  list.replaceChildren(...items.map(card));
  const count = pending.size;
  $('#approvals-pane').hidden = count === 0;
  const badge = $('#approvals-badge');
  badge.textContent = count ? `${count} to approve` : '';
  badge.hidden = count === 0;
  document.title = count ? `(${count}) ${baseTitle}` : baseTitle;
}

function apply(approval) {
  const known = pending.get(approval.id);
  if (approval.state === 'pending') {
    pending.set(approval.id, approval);
    // A new screenshot or a new request: redraw; otherwise keep what is typed.
    if (!known || known.has_screenshot !== approval.has_screenshot) render();
  } else if (known) {
    pending.delete(approval.id);
    render();
  }
}

function tick() {
  for (const left of document.querySelectorAll('#approvals-list .left')) {
    const seconds = Math.max(0, Math.round((Number(left.dataset.expires) - Date.now()) / 1000));
    left.textContent = `${seconds} s left`;
  }
}

function follow() {
  const stream = new EventSource('/v1/approvals/events');
  stream.addEventListener('approval', (event) => apply(JSON.parse(event.data)));
  stream.addEventListener('resync', async () => {
    const { approvals } = await api('GET', '/v1/approvals?state=pending');
    pending.clear();
    for (const a of approvals) pending.set(a.id, a);
    render();
  });
  // EventSource reconnects by itself; the stream sends every pending one again.
  stream.addEventListener('open', () => { pending.clear(); render(); });
}

async function start() {
  try {
    me = await api('GET', '/v1/me');
  } catch {
    return;
  }
  follow();
  setInterval(tick, 1000);
}

start();
