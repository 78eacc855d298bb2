// The operator page in headless Chromium (Debian's /usr/bin/chromium, driven
// by playwright-core): an operator and an auditor watch one workspace, the
// operator takes over, types, hands back; the agent is refused meanwhile and
// works again after. Then: how long an agent action takes to show in noVNC.
//
// usage: node operator.mjs '<json config>'
//   {base, workspace, region: {x,y,width,height}, operator, auditor, agent, admin}
// prints one JSON line of what it saw; the Rust test (tests/e2e/operator.rs)
// asserts on it and checks the workspace's side through exec.

import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.timeOrigin + performance.now();
const out = { steps: [] };
const step = (name) => { out.steps.push(name); console.error(`operator.mjs: ${name}`); };

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
  const { status, body } = await api(cfg.admin, 'POST', `/v1/workspaces/${cfg.workspace}/exec`, { command });
  if (status !== 200) throw new Error(`exec ${command}: ${status} ${JSON.stringify(body)}`);
  return body.stdout;
}

async function appears(name, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if ((await exec(`test -e /home/user/${name} && echo yes`)).trim() === 'yes') return true;
    await sleep(200);
  }
  return false;
}

// Distinct colours on the noVNC canvas (sampled), once the desktop is there.
async function canvasColours(page) {
  return page.evaluate(async () => {
    for (let i = 0; i < 150; i++) {
      const canvas = document.querySelector('#screen canvas');
      if (canvas && canvas.width > 0) {
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        const seen = new Set();
        for (let p = 0; p < data.length; p += 4 * 13) seen.add((data[p] << 16) | (data[p + 1] << 8) | data[p + 2]);
        if (seen.size > 50) return { width: canvas.width, height: canvas.height, colours: seen.size };
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    return null;
  });
}

async function openView(page, token) {
  await page.goto(`${cfg.base}/?token=${token}`);
  await page.click(`tr[data-id="${cfg.workspace}"] button:text("View")`);
  await page.waitForSelector('#view-state[data-state="live"]', { timeout: guard(30000) });
  await page.waitForSelector('#holder:not([data-holder=""])', { timeout: guard(10000) });
}

async function typeInto(page, text) {
  await page.focus('#screen canvas');
  await page.keyboard.type(text, { delay: 30 });
  await page.keyboard.press('Enter');
}

// Time from an agent action to a change in `region` of the page's canvas.
async function latency(page, samples) {
  const r = cfg.region;
  const times = [];
  for (let i = 0; i < samples; i++) {
    const waiter = page.evaluate(([x, y, w, h]) => new Promise((resolve) => {
      const g = document.querySelector('#screen canvas').getContext('2d', { willReadFrequently: true });
      const hash = () => {
        const d = g.getImageData(x, y, w, h).data;
        let s = 0;
        for (let p = 0; p < d.length; p += 4) s = (Math.imul(s, 31) + d[p] + d[p + 1] * 7 + d[p + 2] * 13) | 0;
        return s;
      };
      const first = hash();
      const start = performance.now();
      window.__armed = true;
      const tick = () => {
        if (hash() !== first) return resolve(performance.timeOrigin + performance.now());
        if (performance.now() - start > 5000) return resolve(null);
        setTimeout(tick, 1);
      };
      tick();
    }), [r.x, r.y, r.width, r.height]);
    await page.waitForFunction(() => window.__armed === true);
    await page.evaluate(() => { window.__armed = false; });
    const action = i % 2 === 0 ? { action: 'type', text: 'x' } : { action: 'key', text: 'BackSpace' };
    const started = now();
    const done = await api(cfg.agent, 'POST', `/v1/workspaces/${cfg.workspace}/actions`, action);
    const seen = await waiter;
    if (done.status === 200 && seen) times.push(seen - started);
    await sleep(100);
  }
  return times;
}

// playwright gives every launch a fresh temporary profile (--user-data-dir).
const browser = await launch();
try {
  const operator = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  operator.setDefaultTimeout(guard(30_000));
  await operator.goto(`${cfg.base}/?token=${cfg.operator}`);
  out.landed = new URL(operator.url()).pathname + new URL(operator.url()).search;
  // The page asks the gateway who it is after loading: wait for the answer.
  await operator.waitForFunction(() => document.querySelector('#me')?.textContent !== '', null, { timeout: guard(10000) });
  out.me = await operator.textContent('#me');
  step('page loaded with a token');
  await openView(operator, cfg.operator);
  out.canvas = await canvasColours(operator);
  out.holderAtStart = await operator.getAttribute('#holder', 'data-holder');
  step('operator sees the desktop');

  const auditor = await (await browser.newContext({ viewport: { width: 1000, height: 700 } })).newPage();
  auditor.setDefaultTimeout(guard(30_000));
  await openView(auditor, cfg.auditor);
  out.auditorTakeDisabled = await auditor.isDisabled('#take');
  out.auditorCanvas = await canvasColours(auditor);
  step('auditor watches too');

  // The agent calls for a person: the operator's page shows the call in
  // the view and in the list, until the operator takes over.
  out.callAnswer = await api(cfg.agent, 'POST', `/v1/workspaces/${cfg.workspace}/handoff`, { reason: 'please solve the captcha' });
  await operator.waitForSelector('#call:not([hidden])', { timeout: guard(10000) });
  out.callShown = await operator.textContent('#call');
  await operator.waitForSelector(`#workspaces tr[data-id="${cfg.workspace}"][data-call="waiting"]`, { timeout: guard(15000) });
  out.callListed = await operator.textContent(`#workspaces tr[data-id="${cfg.workspace}"] .call`);
  out.callBadReason = await api(cfg.agent, 'POST', `/v1/workspaces/${cfg.workspace}/handoff`, { reason: '' });
  out.callByAuditor = await api(cfg.auditor, 'POST', `/v1/workspaces/${cfg.workspace}/handoff`, { reason: 'me too' });
  step('the agent called for a person');

  await operator.click('#take');
  await operator.waitForSelector('#holder[data-mine="true"]', { timeout: guard(5000) });
  await operator.waitForSelector('#call', { state: 'hidden', timeout: guard(5000) });
  out.callAfterTake = (await api(cfg.agent, 'GET', `/v1/workspaces/${cfg.workspace}`)).body.call ?? null;
  const took = now();
  await auditor.waitForSelector('#holder[data-holder="operator:alice"]', { timeout: guard(5000) });
  out.auditorSawTakeMs = now() - took;
  out.auditorHolderText = await auditor.textContent('#holder');
  out.agentWhileHeld = await api(cfg.agent, 'POST', `/v1/workspaces/${cfg.workspace}/actions`, { action: 'key', text: 'a' });
  step('taken over');

  // The clipboard panel: the operator sets the desktop's clipboard from
  // the page and reads back what the API put there; the auditor has none.
  out.auditorClipboardHidden = await auditor.isHidden('#clipboard-pane');
  await operator.click('#clipboard-pane summary');
  await operator.fill('#clipboard-text', 'from the page ✓');
  await operator.click('#clipboard-set');
  await operator.waitForFunction(() => document.querySelector('#clipboard-status').textContent.startsWith('set'), null, { timeout: guard(10000) });
  out.clipboardFromPage = await api(cfg.agent, 'GET', `/v1/workspaces/${cfg.workspace}/clipboard`);
  out.clipboardSetByApi = await api(cfg.admin, 'PUT', `/v1/workspaces/${cfg.workspace}/clipboard`, { text: 'from the API ✓' });
  await operator.click('#clipboard-read');
  await operator.waitForFunction(() => document.querySelector('#clipboard-status').textContent.startsWith('read'), null, { timeout: guard(10000) });
  out.clipboardInPage = await operator.inputValue('#clipboard-text');
  step('clipboard panel');

  await typeInto(operator, 'touch tookover');
  out.operatorTypingReached = await appears('tookover', 10000);
  step('operator typed');

  await operator.click('#release');
  await operator.waitForSelector('#holder[data-holder="agent"]', { timeout: guard(5000) });
  const released = now();
  await auditor.waitForSelector('#holder[data-holder="agent"]', { timeout: guard(5000) });
  out.auditorSawReleaseMs = now() - released;
  step('handed back');

  await typeInto(operator, 'touch afterhandback');
  await typeInto(auditor, 'touch fromauditor');
  await sleep(1500);
  out.afterHandBack = (await exec('ls /home/user')).split('\n').filter(Boolean);
  out.agentAfter = await api(cfg.agent, 'POST', `/v1/workspaces/${cfg.workspace}/actions`, { action: 'type', text: 'touch agentagain\n' });
  out.agentTypingReached = await appears('agentagain', 10000);
  step('agent drives again');

  out.latencyMs = await latency(operator, 21);
  step('measured');
} catch (err) {
  out.error = String(err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
