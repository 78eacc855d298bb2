// Playwright, unchanged, against a workspace's browser through the gateway:
// `connectOverCDP(<gateway>/v1/workspaces/<id>/cdp, { headers })`.
//
// usage: node cdp_connect.mjs <endpoint> <token>
// prints one JSON line: what the page showed and what the gateway listed.
//
// playwright-core comes from web/node_modules (`npm ci` in web/); it only
// connects, no browser is downloaded.

import { createRequire } from 'node:module';
import { guard } from './guard.mjs';

const require = createRequire(new URL('../../web/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const [endpoint, token] = process.argv.slice(2);
if (!endpoint || !token) {
  console.error('usage: node cdp_connect.mjs <endpoint> <token>');
  process.exit(2);
}
const headers = { Authorization: `Bearer ${token}` };

const browser = await chromium.connectOverCDP(endpoint, { headers, timeout: guard(30_000) });
try {
  const context = browser.contexts()[0];
  context.setDefaultTimeout(guard(30_000));
  const page = await context.newPage();
  const html = '<title>Cubicle CDP test</title><h1 id="greeting">hello from the workspace</h1>';
  await page.goto(`data:text/html,${encodeURIComponent(html)}`);
  const title = await page.title();
  const answer = await page.evaluate(() => 6 * 7);
  const heading = await page.textContent('#greeting');
  const userAgent = await page.evaluate(() => navigator.userAgent);
  const listed = await (await fetch(`${endpoint}/json/list`, { headers })).json();
  const result = {
    title,
    answer,
    heading,
    userAgent,
    version: browser.version(),
    listed: listed.map((target) => ({
      type: target.type,
      title: target.title,
      webSocketDebuggerUrl: target.webSocketDebuggerUrl,
    })),
  };
  await page.close();
  console.log(JSON.stringify(result));
} finally {
  await browser.close();
}
