// The Browser profiles panel in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core): an agent whose workspace runs on its profile
// "work" sees it listed as in use by that workspace and never saved; Remove
// is refused with the gateway's reason. The script then writes the file
// `ready` and the test stops the workspace; the panel's own refresh shows
// the profile free and saved, with a size; Remove takes it off the list.
//
// usage: node profiles.mjs '<json config>'
//   {base, agent, ready}
// prints one JSON line of what it saw; tests/e2e/profiles.rs asserts on it.

import { writeFile } from 'node:fs/promises';
import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  page.on('dialog', (dialog) => dialog.accept());
  await page.goto(`${cfg.base}/?token=${cfg.agent}`);
  await page.waitForSelector('#profiles-pane:not([hidden])', { timeout: guard(15000) });
  await page.click('#profiles-pane summary');
  const row = '#profiles-list li.profile[data-name="work"]';
  await page.waitForSelector(row, { timeout: guard(15000) });
  out.count = await page.textContent('#profiles-count');
  out.inUse = await page.textContent(`${row} .use`);
  out.before = await page.textContent(`${row} .saved`);

  await page.click(`${row} button.remove`);
  await page.waitForFunction((sel) => document.querySelector(sel).textContent !== '',
    `${row} .error`, { timeout: guard(15000) });
  out.refused = await page.textContent(`${row} .error`);
  out.refusedRole = await page.getAttribute(`${row} .error`, 'role');
  await page.screenshot({ path: cfg.screenshot ?? '/tmp/cubicle-profiles-panel.png' });

  // The test stops the workspace now; the panel's timer brings the change.
  await writeFile(cfg.ready, 'refused');
  await page.waitForSelector(`${row}[data-use="free"]`, { timeout: guard(90000) });
  await page.waitForFunction((sel) => document.querySelector(sel).textContent !== 'never saved',
    `${row} .saved`, { timeout: guard(90000) });
  out.use = await page.textContent(`${row} .use`);
  out.saved = await page.textContent(`${row} .saved`);
  out.refusedAfter = await page.textContent(`${row} .error`);

  await page.click(`${row} button.remove`);
  await page.waitForSelector(row, { state: 'detached', timeout: guard(15000) });
  out.rows = await page.locator('#profiles-list li').count();
  out.countAfter = await page.textContent('#profiles-count');
  out.left = await page.evaluate(async () => (await (await fetch('/v1/profiles')).json()).profiles.map((p) => p.name));
  out.error = null;
} catch (err) {
  out.error = String(err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
