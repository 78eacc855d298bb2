// Share links in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core), as the person who got one: a view link shows the live
// screen with no way to take control; a control link has "Take control",
// and once pressed the person's click reaches the desktop. Then the
// operator revokes the view link (through the API, as the operator page
// would): the open page ends, and opening the link again shows it revoked
// and nothing of the workspace.
//
// usage: node share.mjs '<json config>'
//   {base, operator, workspace, view: {id, url}, control: {url}}
// prints one JSON line of what it saw; tests/e2e/share.rs asserts on it.

import { guard, launch } from './guard.mjs';


const cfg = JSON.parse(process.argv[2] ?? '{}');
const out = {};

const browser = await launch();
const state = (page) => page.evaluate(() => ({
  state: document.querySelector('#state').dataset.state,
  text: document.querySelector('#state').textContent,
}));
// Whether the screen canvas shows something other than one colour.
const painted = (page) => page.evaluate(() => {
  const canvas = document.querySelector('#screen canvas');
  if (!canvas || canvas.width < 100) return false;
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  for (let i = 4; i < data.length; i += 4 * 97) {
    if (data[i] !== data[0] || data[i + 1] !== data[1] || data[i + 2] !== data[2]) return true;
  }
  return false;
});
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });

  // The view link: the screen, no control.
  const viewer = await context.newPage();
  await viewer.goto(`${cfg.base}${cfg.view.url}`);
  await viewer.waitForFunction(() => document.querySelector('#state').dataset.state === 'live',
    null, { timeout: guard(30000) });
  await viewer.waitForFunction(() => !!document.querySelector('#screen canvas'), null, { timeout: guard(15000) });
  const deadline = Date.now() + guard(30000);
  while (!(await painted(viewer)) && Date.now() < deadline) await viewer.waitForTimeout(200);
  out.viewPainted = await painted(viewer);
  out.viewState = await state(viewer);
  out.viewTitle = await viewer.textContent('#title');
  out.viewTakeHidden = await viewer.isHidden('#take');
  // What a person would try: click and type on the screen.
  const box = await viewer.locator('#screen canvas').boundingBox();
  await viewer.mouse.click(box.x + box.width * 0.7, box.y + box.height * 0.6);
  await viewer.keyboard.type('touch pwned_share_page\n');

  // The control link: take control, then a click lands.
  const guest = await context.newPage();
  await guest.goto(`${cfg.base}${cfg.control.url}`);
  await guest.waitForFunction(() => document.querySelector('#state').dataset.state === 'live',
    null, { timeout: guard(30000) });
  out.controlTakeVisible = await guest.isVisible('#take');
  await guest.click('#take');
  await guest.waitForFunction(() => document.querySelector('#state').dataset.state === 'control',
    null, { timeout: guard(15000) });
  out.controlState = await state(guest);
  const gbox = await guest.locator('#screen canvas').boundingBox();
  // The top-left quarter of the remote screen, scaled into the canvas.
  await guest.mouse.move(gbox.x + gbox.width * 0.25, gbox.y + gbox.height * 0.25);
  await guest.mouse.move(gbox.x + gbox.width * 0.25 + 3, gbox.y + gbox.height * 0.25 + 3);
  out.controlPointerSent = true;
  await guest.waitForTimeout(500);
  await guest.click('#release');
  await guest.waitForFunction(() => document.querySelector('#state').dataset.state === 'live',
    null, { timeout: guard(15000) });

  // The operator revokes the view link: the open page ends.
  const revoked = await fetch(`${cfg.base}/v1/workspaces/${cfg.workspace}/shares/${cfg.view.id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${cfg.operator}` },
  });
  out.revokeStatus = revoked.status;
  await viewer.waitForFunction(() => document.querySelector('#state').dataset.state === 'gone',
    null, { timeout: guard(15000) });
  out.afterRevoke = await state(viewer);
  out.afterRevokeCanvas = await viewer.evaluate(() => !!document.querySelector('#screen canvas'));
  // Opened again: refused, nothing of the workspace.
  await viewer.reload();
  await viewer.waitForFunction(() => document.querySelector('#state').dataset.state === 'gone',
    null, { timeout: guard(15000) });
  out.reopened = await state(viewer);
  out.reopenedMentionsWorkspace = (await viewer.content()).includes(cfg.workspace);
  out.error = null;
} catch (err) {
  out.error = String(err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
