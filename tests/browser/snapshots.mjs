// Snapshots in the operator page, in headless Chromium: an agent opens its
// workspace's live view and takes a snapshot from the view's Snapshots pane;
// changes a file; rolls back from the pane (the file is as it was); starts
// two workspaces from the snapshot in the list's Snapshots panel with a
// count; removes the snapshot there.
//
// usage: node snapshots.mjs '<json config>'   {base, agent, workspace}
// prints one JSON line of what it saw; tests/e2e/snapshots.rs asserts on it.

import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};

const browser = await launch();

// A shell line run in the workspace through the API, with the page's cookie.
async function exec(page, command) {
  return page.evaluate(async ({ id, command }) => {
    const response = await fetch(`/v1/workspaces/${id}/exec`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ command }),
    });
    return (await response.json()).stdout;
  }, { id: cfg.workspace, command });
}

try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  page.on('dialog', (dialog) => dialog.accept());
  await page.goto(`${cfg.base}/?token=${cfg.agent}`);
  await page.click(`tr[data-id="${cfg.workspace}"] button:text("View")`);
  await page.waitForSelector('#view-state[data-state="live"]', { timeout: guard(30000) });
  await page.waitForSelector('#view-snapshots-pane:not([hidden])', { timeout: guard(15000) });
  await page.click('#view-snapshots-pane summary');

  await page.fill('#view-snapshots-form input[name="name"]', 'ready');
  await page.click('#view-snapshots-form button[type="submit"]');
  const taken = '#view-snapshots-list li[data-name="ready"]';
  await page.waitForSelector(taken, { timeout: guard(180000) });
  out.took = await page.textContent('#view-snapshots-status');
  out.viewCount = await page.textContent('#view-snapshots-count');
  // A name taken already: the gateway's refusal is shown where the button is.
  await page.fill('#view-snapshots-form input[name="name"]', 'ready');
  await page.click('#view-snapshots-form button[type="submit"]');
  await page.waitForFunction(() => document.querySelector('#view-snapshots-error').textContent !== '',
    null, { timeout: guard(30000) });
  out.refused = await page.textContent('#view-snapshots-error');

  out.changed = await exec(page, 'echo changed > ~/page.txt && cat ~/page.txt');
  await page.click(`${taken} button.rollback`);
  await page.waitForFunction(() => document.querySelector('#view-snapshots-status').textContent.startsWith('rolled back'),
    null, { timeout: guard(180000) });
  out.rolledBack = await page.textContent('#view-snapshots-status');
  out.afterRollback = await exec(page, 'cat ~/page.txt');
  await page.screenshot({ path: cfg.screenshot ?? '/tmp/cubicle-snapshots-view.png' });

  // The list's panel: two new workspaces from it, then remove it.
  await page.click('#close-view');
  await page.click('#snapshots-pane summary');
  const row = '#snapshots-list li.snapshot[data-name="ready"]';
  await page.waitForSelector(row, { timeout: guard(15000) });
  out.count = await page.textContent('#snapshots-count');
  out.holds = await page.textContent(`${row} .holds`);
  await page.fill(`${row} input[name="count"]`, '2');
  await page.click(`${row} button.start`);
  await page.waitForFunction(() => (document.querySelector('#snapshots-started').dataset.started ?? '') !== '',
    null, { timeout: guard(400000) });
  out.started = (await page.getAttribute('#snapshots-started', 'data-started')).split(' ');
  out.startedText = await page.textContent('#snapshots-started');
  await page.screenshot({ path: cfg.panelScreenshot ?? '/tmp/cubicle-snapshots-panel.png' });
  await page.click(`${row} button.remove`);
  await page.waitForSelector(row, { state: 'detached', timeout: guard(15000) });
  out.countAfter = await page.textContent('#snapshots-count');
  out.error = null;
} catch (err) {
  out.error = String(err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
