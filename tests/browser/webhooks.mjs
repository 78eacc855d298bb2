// The Webhooks panel and the page's `/#ws-id` in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core): an operator opens the page
// on one workspace (what `cubicle ws view` opens) and sees its live view;
// adds a webhook for that workspace's lifecycle and sees its signing secret
// once; pauses and resumes the workspace and sees the delivery's outcome in
// the panel; sees a refused URL's reason; removes the webhook.
//
// usage: node webhooks.mjs '<json config>'
//   {base, operator, workspace, name, receiver}
// prints one JSON line of what it saw; tests/e2e/webhooks.rs asserts on it
// and on what the receiver got.

import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  page.on('dialog', (dialog) => dialog.accept());
  await page.goto(`${cfg.base}/?token=${cfg.operator}#${cfg.workspace}`);
  await page.waitForSelector('#view-pane:not([hidden])', { timeout: guard(15000) });
  out.viewTitle = await page.textContent('#view-title');
  await page.waitForSelector('#view-state[data-state="live"]', { timeout: guard(30000) });
  out.viewState = await page.getAttribute('#view-state', 'data-state');

  await page.waitForSelector('#webhooks-pane:not([hidden])', { timeout: guard(15000) });
  await page.click('#webhooks-pane summary');
  await page.fill('#webhooks-form input[name="url"]', `http://127.0.0.1:${cfg.receiver}/page`);
  await page.fill('#webhooks-form input[name="kinds"]', 'workspace.*');
  await page.fill('#webhooks-form input[name="workspace"]', cfg.workspace);
  await page.click('#webhooks-form button[type="submit"]');
  await page.waitForSelector('#webhooks-secret:not([hidden])', { timeout: guard(15000) });
  out.secret = await page.textContent('#webhooks-secret-value');
  const row = '#webhooks-list li.webhook';
  await page.waitForSelector(row, { timeout: guard(15000) });
  out.id = await page.getAttribute(row, 'data-id');
  out.url = await page.textContent(`${row} .url`);
  out.kinds = await page.textContent(`${row} .kinds`);
  out.count = await page.textContent('#webhooks-count');

  // Something to deliver: the workspace paused and resumed by the operator.
  out.lifecycle = await page.evaluate(async (id) => {
    const statuses = [];
    for (const verb of ['pause', 'resume']) {
      statuses.push((await fetch(`/v1/workspaces/${id}/${verb}`, { method: 'POST' })).status);
    }
    return statuses;
  }, cfg.workspace);
  await page.waitForSelector(`${row} .last[data-last="ok"]`, { timeout: guard(30000) });
  out.last = await page.textContent(`${row} .last`);
  await page.screenshot({ path: cfg.screenshot ?? '/tmp/cubicle-webhooks-panel.png' });

  // A URL the gateway refuses: its reason, in the panel.
  await page.fill('#webhooks-form input[name="url"]', 'ftp://127.0.0.1/x');
  await page.click('#webhooks-form button[type="submit"]');
  await page.waitForFunction(() => document.querySelector('#webhooks-error').textContent !== '', null,
    { timeout: guard(15000) });
  out.refused = await page.textContent('#webhooks-error');
  out.secretAfterRefusal = await page.isVisible('#webhooks-secret');

  await page.click(`${row} button.remove`);
  await page.waitForSelector(row, { state: 'detached', timeout: guard(15000) });
  out.left = await page.evaluate(async () => (await (await fetch('/v1/webhooks')).json()).webhooks.length);
  out.error = null;
} catch (err) {
  out.error = String(err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
