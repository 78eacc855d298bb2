// The operator page with a held egress destination: the workspace's curl
// asked for a host its policy says `confirm` to; the card must read as a
// destination (host:port, the page that asked) with Allow once / Allow for
// this workspace / Deny, and the workspace button must decide it.
//
// usage: node egress_approvals.mjs '<json config>'   {base, operator}
// prints one JSON line of what it saw; tests/e2e/egress_policy.rs asserts on it.

import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await page.goto(`${cfg.base}/?token=${cfg.operator}`);
  const card = await page.waitForSelector('#approvals-list .approval[data-operation="egress"]', { timeout: guard(60000) });
  out.headline = await card.$eval('.what strong', (e) => e.textContent);
  out.page = await card.$eval('.context.egress .page', (e) => e.textContent);
  out.buttons = await card.$$eval('.decide button', (all) => all.map((b) => b.textContent));
  await card.$eval('.reason', (input) => { input.value = 'docs site'; });
  await card.$eval('button.approve-workspace', (b) => b.click());
  await page.waitForFunction(() => !document.querySelector('#approvals-list .approval[data-operation="egress"]'), null, { timeout: guard(15000) });
  out.gone = true;
} catch (err) {
  out.error = String(err && err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
