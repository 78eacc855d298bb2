// The Secrets panel in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core): an operator stores a secret for a host, for
// request bodies too, sees it listed with where it goes (never its value),
// gives it to a workspace with a variable and sees the placeholder, sees
// why a secret (headers only) for a host the workspace may not reach is
// refused, and removes that one.
//
// usage: node secrets.mjs '<json config>'
//   {base, operator, workspace, value}
// prints one JSON line of what it saw; tests/e2e/secrets.rs asserts on it.

import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  page.on('dialog', (dialog) => dialog.accept());
  await page.goto(`${cfg.base}/?token=${cfg.operator}`);
  await page.waitForSelector('#secrets-pane:not([hidden])', { timeout: guard(15000) });
  await page.click('#secrets-pane summary');
  const store = async (name, value, hosts, body) => {
    await page.fill('#secrets-form input[name="name"]', name);
    await page.fill('#secrets-form input[name="value"]', value);
    await page.fill('#secrets-form input[name="hosts"]', hosts);
    await page.setChecked('#secrets-form input[name="body"]', body);
    await page.click('#secrets-form button[type="submit"]');
  };
  await store('api key', cfg.value, 'api.allowed.test', true);
  const row = (name) => `#secrets-list li.secret[data-name="${name}"]`;
  await page.waitForSelector(row('api key'), { timeout: guard(15000) });
  out.hosts = await page.textContent(`${row('api key')} .hosts`);
  out.swaps = await page.textContent(`${row('api key')} .swaps`);
  out.bodyBoxAfter = await page.isChecked('#secrets-form input[name="body"]');
  out.valueField = await page.inputValue('#secrets-form input[name="value"]');
  out.count = await page.textContent('#secrets-count');

  await page.fill(`${row('api key')} input[name="workspace"]`, cfg.workspace);
  await page.fill(`${row('api key')} input[name="env"]`, 'API_KEY');
  await page.click(`${row('api key')} form.give button`);
  await page.waitForSelector(`${row('api key')} .placeholder`, { timeout: guard(15000) });
  out.placeholder = await page.textContent(`${row('api key')} .placeholder`);
  out.given = await page.textContent(`${row('api key')} .given`);

  await store('elsewhere', 'v', 'api.notallowed.test', false);
  await page.waitForSelector(row('elsewhere'), { timeout: guard(15000) });
  out.swapsElsewhere = await page.textContent(`${row('elsewhere')} .swaps`);
  out.stored = await page.evaluate(async () => (await (await fetch('/v1/secrets')).json()).secrets
    .map((s) => [s.name, s.body]));
  await page.fill(`${row('elsewhere')} input[name="workspace"]`, cfg.workspace);
  await page.click(`${row('elsewhere')} form.give button`);
  await page.waitForFunction((sel) => document.querySelector(sel).textContent !== '',
    `${row('elsewhere')} .error`, { timeout: guard(15000) });
  out.refused = await page.textContent(`${row('elsewhere')} .error`);

  out.pageHoldsValue = (await page.content()).includes(cfg.value);
  await page.screenshot({ path: cfg.screenshot ?? '/tmp/cubicle-secrets-panel.png' });
  await page.click(`${row('elsewhere')} button.remove`);
  await page.waitForSelector(row('elsewhere'), { state: 'detached', timeout: guard(15000) });
  out.left = await page.evaluate(async () => (await (await fetch('/v1/secrets')).json()).secrets.map((s) => s.name));
  out.error = null;
} catch (err) {
  out.error = String(err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
