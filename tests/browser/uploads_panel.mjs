// The live view's Upload pane, in headless Chromium, as two operators use
// it: one views the workspace (whose page has a file input) and uploads
// from the pane; the default policy holds it, the other operator approves
// it in the Approvals panel of their own page, and the first one's pane
// sends it again by itself and says what was uploaded where.
//
// part "file": a text file from this computer, first into a field that is
//   no file input (refused, the file stays chosen), then — the same choice,
//   Upload pressed again — into the file input (held, approved, uploaded);
//   then the EICAR test file (refused, naming the scan's rule); then
//   another file, which the other operator denies.
// part "download": a released download of the workspace, picked in the
//   pane instead of a file (held, approved, uploaded).
//
// usage: node uploads_panel.mjs '<json config>'
//   {base, uploader, decider, workspace, part, text, eicar, screenshot}
// prints one JSON line of what it saw; tests/e2e/uploads.rs asserts on it
// (and reads the workspace page's file input over CDP).

import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};

const browser = await launch();

const pane = '#uploads-pane';
const submit = '#uploads-form button[type="submit"]';
const fileField = '#uploads-form input[name="file"]';

/// Waits until the pane's outcome is `outcome`; what it says then.
async function outcome(page, outcome, ms) {
  await page.waitForSelector(`${pane}[data-outcome="${outcome}"]`, { timeout: guard(ms) });
  const line = outcome === 'refused' ? '#uploads-error' : '#uploads-status';
  return page.textContent(line);
}

/// The file the pane's file field holds (its name), or ''.
const chosenFile = (page) => page.$eval(fileField, (input) => (input.files.length ? input.files[0].name : ''));

/// The other operator decides the held upload in their page's Approvals
/// panel (`verb`: approve or deny, with `reason`); the card's headline.
async function decideInPanel(decider, verb, reason) {
  const card = '#approvals-list li.approval[data-operation="browser.upload"]';
  await decider.waitForSelector(card, { timeout: guard(30000) });
  // The card is drawn again when its screenshot arrives: use that one.
  const live = await decider.waitForSelector(`${card}:has(img.shot)`, { timeout: guard(15000) })
    .catch(() => decider.$(card));
  const headline = await live.$eval('.what', (e) => e.textContent);
  await live.$eval('.reason', (input, text) => { input.value = text; }, reason);
  await live.$eval(`button.${verb}`, (b) => b.click());
  // Gone from the panel once decided.
  await decider.waitForSelector(card, { state: 'detached', timeout: guard(15000) });
  return headline;
}

/// Held, then approved by the other operator, then uploaded: what the
/// uploader's pane said at each step.
async function heldThenApproved(page, decider) {
  const seen = {};
  seen.held = await outcome(page, 'held', 60000);
  seen.disabledWhileHeld = await page.isDisabled(submit);
  seen.stopWhileHeld = await page.isVisible('#uploads-stop');
  seen.card = await decideInPanel(decider, 'approve', 'expected file');
  seen.uploaded = await outcome(page, 'uploaded', 60000);
  seen.enabledAfter = !(await page.isDisabled(submit));
  return seen;
}

try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  await page.goto(`${cfg.base}/?token=${cfg.uploader}`);
  await page.click(`tr[data-id="${cfg.workspace}"] button:text("View")`);
  await page.waitForSelector('#view-state[data-state="live"]', { timeout: guard(30000) });
  await page.waitForSelector(`${pane}:not([hidden])`, { timeout: guard(15000) });
  await page.click(`${pane} summary`);

  const decider = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await decider.goto(`${cfg.base}/?token=${cfg.decider}`);

  if (cfg.part === 'file') {
    await page.setInputFiles(fileField, { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from(cfg.text) });
    // A text field is no file input: refused at once, the file kept.
    await page.fill('#uploads-form input[name="selector"]', '#t');
    await page.click(submit);
    out.notFileInput = await outcome(page, 'refused', 30000);
    out.keptAfterRefusal = await chosenFile(page);
    // The same choice into the file input.
    await page.fill('#uploads-form input[name="selector"]', '#f');
    await page.click(submit);
    out.file = await heldThenApproved(page, decider);
    out.clearedAfterUpload = await chosenFile(page);
    await page.screenshot({ path: cfg.screenshot ?? '/tmp/cubicle-uploads-panel.png' });

    // The EICAR test file: refused by the scan, never a person's question.
    await page.setInputFiles(fileField, { name: 'eicar.com', mimeType: 'application/octet-stream', buffer: Buffer.from(cfg.eicar) });
    await page.click(submit);
    out.flagged = await outcome(page, 'refused', 30000);
    out.keptAfterFlag = await chosenFile(page);
    out.enabledAfterFlag = !(await page.isDisabled(submit));

    // Denied by the other operator: the pane says by whom and why.
    await page.setInputFiles(fileField, { name: 'other.txt', mimeType: 'text/plain', buffer: Buffer.from('not for this page') });
    await page.click(submit);
    await outcome(page, 'held', 60000);
    await decideInPanel(decider, 'deny', 'not this one');
    out.denied = await outcome(page, 'refused', 60000);
    out.keptAfterDenial = await chosenFile(page);
  } else if (cfg.part === 'download') {
    const select = '#uploads-form select[name="download"]';
    await page.waitForSelector(`${select} option[value="${cfg.download}"]`, { state: 'attached', timeout: guard(15000) });
    out.offered = await page.textContent(`${select} option[value="${cfg.download}"]`);
    await page.selectOption(select, cfg.download);
    out.fileFieldDisabled = await page.isDisabled(fileField);
    await page.fill('#uploads-form input[name="selector"]', '#f');
    await page.click(submit);
    out.download = await heldThenApproved(page, decider);
  } else {
    throw new Error(`part: ${cfg.part} is not file or download`);
  }
  out.error = null;
} catch (err) {
  out.error = String(err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
