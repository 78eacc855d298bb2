// The Downloads panel in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core): an operator sees the held file (name, size,
// sniffed type, hash, rule hits) and releases it; an auditor sees it with no
// buttons.
//
// usage: node downloads.mjs '<json config>'
//   {base, operator, auditor, download}
// prints one JSON line of what it saw; tests/e2e/egress.rs asserts on it
// and checks ~/Downloads in the workspace.

import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};
const row = `#downloads-list li[data-id="${cfg.download}"]`;

const browser = await launch();
try {
  const auditor = await (await browser.newContext()).newPage();
  await auditor.goto(`${cfg.base}/?token=${cfg.auditor}`);
  await auditor.waitForSelector(row, { timeout: guard(15000) });
  out.auditorButtons = await auditor.locator(`${row} button`).count();

  const operator = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await operator.goto(`${cfg.base}/?token=${cfg.operator}`);
  await operator.waitForSelector(row, { timeout: guard(15000) });
  out.paneVisible = await operator.isVisible('#downloads-pane');
  out.count = await operator.textContent('#downloads-count');
  out.name = await operator.textContent(`${row} .name`);
  out.size = await operator.textContent(`${row} .size`);
  out.type = await operator.textContent(`${row} .type`);
  out.sha256 = await operator.textContent(`${row} .sha256`);
  out.hits = await operator.locator(`${row} .hits li`).evaluateAll((items) => items.map((i) => i.dataset.rule));
  await operator.screenshot({ path: cfg.screenshot ?? '/tmp/cubicle-downloads-panel.png' });
  await operator.fill(`${row} .reason`, 'checked by hand');
  await operator.click(`${row} button.release`);
  await operator.waitForSelector(`${row}[data-state="released"]`, { timeout: guard(15000) });
  out.after = await operator.textContent(`${row} .state`);
  out.error = null;
} catch (err) {
  out.error = String(err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
