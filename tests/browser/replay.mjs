// The replay page in headless Chromium (Debian's /usr/bin/chromium, driven
// by playwright-core), as an auditor: the recorded session is listed, the
// video loads with a duration, the badge says verified, clicking an event
// seeks the video to it, the event at the play head is highlighted, each
// row names what it was about, the kind filter works, and the frame shown there is compared with a
// screenshot the test took at that moment.
//
// usage: node replay.mjs '<json config>'
//   {base, token, workspace, event, screenshot}
//   event: the id of the event to click; screenshot: a PNG file taken then.
// prints one JSON line of what it saw; tests/e2e/replay.rs asserts on it.

import { createRequire } from 'node:module';
import { guard } from './guard.mjs';
import fs from 'node:fs';

const require = createRequire(new URL('../../web/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};
const step = (name) => console.error(`replay.mjs: ${name}`);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--autoplay-policy=no-user-gesture-required'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  page.on('console', (m) => console.error(`page: ${m.text()}`));
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
  step('log in on the replay page itself');
  await page.goto(`${cfg.base}/replay?token=${cfg.token}`);
  out.urlAfterLogin = page.url();
  step('open the session');
  const row = page.locator(`#sessions tbody tr[data-id="${cfg.workspace}"]`);
  await row.waitFor({ timeout: guard(20000) });
  out.listedState = await row.locator('td').nth(1).textContent();
  await row.click();
  await page.waitForFunction(() => {
    const v = document.querySelector('#player');
    return v.readyState >= 1 && Number.isFinite(v.duration) && v.duration > 0;
  }, null, { timeout: guard(30000) });
  out.duration = await page.$eval('#player', (v) => v.duration);
  await page.waitForFunction(() => document.querySelector('#verify').dataset.state !== 'checking', null, { timeout: guard(30000) });
  out.badge = await page.$eval('#verify', (b) => ({ state: b.dataset.state, text: b.textContent }));
  out.events = await page.$$eval('#timeline li', (items) => items.length);
  out.har = await page.evaluate(async () => {
    const answer = await fetch(document.querySelector('#har').href);
    const har = await answer.json();
    return { status: answer.status, version: har.log && har.log.version, entries: (har.log && har.log.entries || []).length };
  });
  // What each row says it was about, as the auditor reads it.
  out.rows = await page.$$eval('#timeline li', (items) => items.map((li) => ({
    kind: li.dataset.kind,
    outcome: li.dataset.outcome,
    detail: li.querySelector('.detail').textContent,
  })));

  step('click the event');
  const item = page.locator(`#timeline li[data-id="${cfg.event}"]`);
  out.eventVideoMs = Number(await item.getAttribute('data-video-ms'));
  await page.$eval('#player', (v) => v.pause());
  const seeked = page.$eval('#player', (v) => new Promise((resolve) => v.addEventListener('seeked', resolve, { once: true })));
  await item.click();
  await seeked;
  // Let the frame at the new position be decoded and shown.
  await page.waitForFunction(() => document.querySelector('#player').readyState >= 2, null, { timeout: guard(10000) });
  await page.waitForTimeout(300);
  out.currentTime = await page.$eval('#player', (v) => v.currentTime);
  out.highlighted = await page.$eval('#timeline li.current', (li) => li.dataset.id).catch(() => null);

  step('compare the frame with the screenshot');
  const png = fs.readFileSync(cfg.screenshot).toString('base64');
  out.frameDiff = await page.evaluate(async (dataUrl) => {
    const w = 320, h = 200;
    const grab = (source) => {
      const c = document.createElement('canvas');
      c.width = w; c.height = h;
      const g = c.getContext('2d');
      g.drawImage(source, 0, 0, w, h);
      return g.getImageData(0, 0, w, h).data;
    };
    const video = grab(document.querySelector('#player'));
    const img = new Image();
    img.src = dataUrl;
    await img.decode();
    const shot = grab(img);
    let sum = 0, n = 0;
    for (let i = 0; i < video.length; i += 4) {
      for (let k = 0; k < 3; k++) sum += Math.abs(video[i + k] - shot[i + k]);
      n += 3;
    }
    // And against a black frame, as the control: a blank video must not pass.
    let dark = 0;
    for (let i = 0; i < shot.length; i += 4) for (let k = 0; k < 3; k++) dark += shot[i + k];
    return { mean: sum / n / 255, blankMean: dark / n / 255 };
  }, `data:image/png;base64,${png}`);

  step('filter by kind');
  await page.selectOption('#kind-filter', 'screenshot');
  out.visibleAfterFilter = await page.$$eval('#timeline li', (items) =>
    items.filter((li) => !li.hidden).map((li) => li.dataset.kind));
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
