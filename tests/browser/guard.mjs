import { createRequire } from 'node:module';

// A hang guard for the browser scripts: `ms`, or twenty times it inside the
// nested test host (CUBICLE_NESTED), where everything runs under emulation.
// The Rust side's `cubicle_tests::guard` does the same. A bound on waiting,
// never a timing assertion.
export const guard = (ms) => (process.env.CUBICLE_NESTED ? ms * 20 : ms);

// Headless Debian Chromium as every page test starts it: no background
// networking (this machine's closed network refuses it), a fresh profile.
export async function launch() {
  const require = createRequire(new URL('../../web/package.json', import.meta.url));
  const { chromium } = require('playwright-core');
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}
