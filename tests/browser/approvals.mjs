// Confirmation gates seen from the people involved, with real clients:
// the agent types into a password field of a page in the workspace's
// Chromium (held), the operator approves it in the operator page (headless
// Chromium) and the text arrives; the next one is denied in the page and
// nothing is typed; Playwright's page.goto to a confirm-listed URL waits
// until an operator approves over the API, and fails when denied.
//
// usage: node approvals.mjs '<json config>'   {base, workspace, operator, agent, admin}
// prints one JSON line of what it saw; tests/e2e/gates.rs asserts on it.

import { createRequire } from 'node:module';
import { guard, launch } from './guard.mjs';

const require = createRequire(new URL('../../web/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const cfg = JSON.parse(process.argv[2] ?? '{}');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const out = { steps: [] };
const step = (name) => { out.steps.push(name); console.error(`approvals.mjs: ${name}`); };

async function api(token, method, path, body) {
  const response = await fetch(`${cfg.base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function exec(command) {
  return api(cfg.admin, 'POST', `/v1/workspaces/${cfg.workspace}/exec`, { command });
}

/// The one pending approval of `operation`, once it is there.
async function pendingOf(operation) {
  for (let i = 0; i < 150; i++) {
    const { body } = await api(cfg.operator, 'GET', '/v1/approvals?state=pending');
    const found = (body.approvals || []).find((a) => a.operation === operation);
    if (found) return found;
    await sleep(200);
  }
  throw new Error(`no pending ${operation} approval`);
}

const cdp = `${cfg.base}/v1/workspaces/${cfg.workspace}/cdp`;
const LOGIN = '<title>login</title><form><input id="user" value="bot"><input id="pw" type="password" autofocus></form>';

// --- The page in the workspace: a password field with the focus. ---------
const admin = await chromium.connectOverCDP(cdp, { headers: { Authorization: `Bearer ${cfg.admin}` }, timeout: guard(30_000) });
const page = await admin.contexts()[0].newPage();
await page.goto(`data:text/html,${encodeURIComponent(LOGIN)}`);
await page.bringToFront();
// The X focus to Chromium's window, so keystrokes reach the page.
await exec('xdotool search --onlyvisible --class chromium windowactivate --sync 2>/dev/null; true');
await page.focus('#pw');
out.focused = await page.evaluate(() => ({ id: document.activeElement.id, hasFocus: document.hasFocus(), visible: document.visibilityState }));
step('login page open with the password field focused');

// --- The operator's page. -------------------------------------------------
const browser = await launch();
try {
  const operator = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await operator.goto(`${cfg.base}/?token=${cfg.operator}`);
  await operator.waitForFunction(() => document.querySelector('#me')?.textContent !== '', null, { timeout: guard(10000) });
  out.titleBefore = await operator.title();

  // 1. Typed into the password field: held until the operator approves.
  const typing = api(cfg.agent, 'POST', `/v1/workspaces/${cfg.workspace}/actions?wait=90`, { action: 'type', text: 's3cret-pw' });
  const card = await operator.waitForSelector('#approvals-list .approval', { timeout: guard(30000) }).catch(async (err) => {
    const answered = await Promise.race([typing, sleep(1000).then(() => 'still waiting')]);
    throw new Error(`no card in the page (${err.message}); the agent's call: ${JSON.stringify(answered)}`);
  });
  step('the held action reached the operator page');
  out.titleHeld = await operator.title();
  out.heldApproval = (await api(cfg.operator, 'GET', '/v1/approvals?state=pending')).body.approvals[0];
  out.badge = await operator.textContent('#approvals-badge');
  // The card is drawn again when its screenshot arrives: use the one with it.
  const live = await operator.waitForSelector('#approvals-list .approval:has(img.shot)', { timeout: guard(15000) }).catch(() => card);
  out.card = await live.innerText();
  out.cardFocus = await live.$eval('.context strong', (e) => e.dataset.focus).catch(() => null);
  out.shot = await live.$eval('img.shot', async (img) => {
    for (let i = 0; i < 50 && !img.complete; i++) await new Promise((r) => setTimeout(r, 100));
    return { width: img.naturalWidth, height: img.naturalHeight };
  }).catch(() => null);
  out.valueWhileHeld = await page.evaluate(() => document.querySelector('#pw').value);
  await live.$eval('.reason', (input) => { input.value = 'expected login'; });
  await live.$eval('button.approve', (b) => b.click());
  const typed = await typing;
  out.approvedStatus = typed.status;
  // The keys go through Xvnc to the page after the action answers: wait
  // for them (bounded) before reading the field.
  await page.waitForFunction(() => document.querySelector('#pw').value === 's3cret-pw', null, { timeout: guard(10000) }).catch(() => {});
  out.valueAfterApprove = await page.evaluate(() => document.querySelector('#pw').value);
  await operator.waitForFunction(() => document.querySelectorAll('#approvals-list .approval').length === 0, null, { timeout: guard(10000) });
  out.titleAfter = await operator.title();
  step('approved in the page: the text arrived');

  // 2. The next one is denied in the page: 403, nothing typed.
  await page.fill('#pw', '');
  await page.focus('#pw');
  const denied = api(cfg.agent, 'POST', `/v1/workspaces/${cfg.workspace}/actions?wait=90`, { action: 'type', text: 'leak-me' });
  await operator.waitForSelector('#approvals-list .approval', { timeout: guard(30000) });
  const second = await operator.waitForSelector('#approvals-list .approval:has(img.shot)', { timeout: guard(15000) });
  await second.$eval('.reason', (input) => { input.value = 'not this password'; });
  await second.$eval('button.deny', (b) => b.click());
  const refused = await denied;
  out.deniedStatus = refused.status;
  out.deniedBody = refused.body;
  await sleep(500);
  out.valueAfterDeny = await page.evaluate(() => document.querySelector('#pw').value);
  step('denied in the page: 403 and nothing typed');
} finally {
  await browser.close();
}

// --- Playwright's page.goto to a confirm-listed URL, as the agent. ---------
const agent = await chromium.connectOverCDP(cdp, { headers: { Authorization: `Bearer ${cfg.agent}` }, timeout: guard(30_000) });
try {
  const tab = await agent.contexts()[0].newPage();
  const started = Date.now();
  const going = tab.goto('data:text/html,held-page-one', { timeout: guard(60000) }).then(() => 'loaded', (e) => `error: ${e.message}`);
  const held = await pendingOf('cdp');
  out.navigationHeld = { url: held.params.params.url, rule: held.rule };
  await sleep(1000);
  out.stillWaiting = (await Promise.race([going, sleep(10).then(() => 'waiting')])) === 'waiting';
  const approved = await api(cfg.operator, 'POST', `/v1/approvals/${held.id}/approve`, { reason: 'fine' });
  out.navigationApprove = approved.status;
  out.navigationApproved = await going;
  out.navigationWaitedMs = Date.now() - started;
  out.heldPageText = await tab.evaluate(() => document.body.textContent).catch((e) => `error: ${e.message}`);
  step('goto held, approved over the API, loaded');

  const refusedGo = tab.goto('data:text/html,held-page-two', { timeout: guard(60000) }).then(() => 'loaded', (e) => `error: ${e.message}`);
  const held2 = await pendingOf('cdp');
  await api(cfg.operator, 'POST', `/v1/approvals/${held2.id}/deny`, { reason: 'no second page' });
  out.navigationDenied = await refusedGo;
  out.urlAfterDeny = tab.url();
  step('goto held, denied over the API, failed');
} finally {
  await agent.close();
  await admin.close();
}
console.log(JSON.stringify(out));
