// The operator page's Share pane in headless Chromium: an operator opens a
// workspace's live view, makes a view link (shown once, whole), opens it
// in another tab (the person's page watches), revokes it from the pane, and
// the person's page ends.
//
// usage: node share_panel.mjs '<json config>'   {base, operator, workspace}
// prints one JSON line of what it saw; tests/e2e/share.rs asserts on it.

import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};

const browser = await launch();
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  page.on('dialog', (dialog) => dialog.accept());
  await page.goto(`${cfg.base}/?token=${cfg.operator}`);
  await page.click(`tr[data-id="${cfg.workspace}"] button:text("View")`);
  await page.waitForSelector('#view-state[data-state="live"]', { timeout: guard(30000) });
  await page.waitForSelector('#shares-pane:not([hidden])', { timeout: guard(15000) });
  await page.click('#shares-pane summary');
  await page.selectOption('#shares-form select[name="mode"]', 'view');
  await page.click('#shares-form button[type="submit"]');
  await page.waitForSelector('#shares-made:not([hidden])', { timeout: guard(15000) });
  out.url = await page.inputValue('#shares-url');
  await page.waitForSelector('#shares-list li[data-state="live"]', { timeout: guard(15000) });
  out.count = await page.textContent('#shares-count');

  // The person's page.
  const person = await context.newPage();
  await person.goto(out.url);
  await person.waitForFunction(() => document.querySelector('#state').dataset.state === 'live',
    null, { timeout: guard(30000) });
  out.personState = await person.textContent('#state');

  await page.click('#shares-list li[data-state="live"] button.revoke');
  await page.waitForSelector('#shares-list li[data-state="revoked"]', { timeout: guard(15000) });
  out.listed = await page.$$eval('#shares-list li', (items) => items.map((i) => i.dataset.state));
  await person.waitForFunction(() => document.querySelector('#state').dataset.state === 'gone',
    null, { timeout: guard(15000) });
  out.personAfter = await person.textContent('#state');
  await page.screenshot({ path: cfg.screenshot ?? '/tmp/cubicle-share-pane.png' });
  out.error = null;
} catch (err) {
  out.error = String(err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
