// Checks a HAR file against the HAR 1.2 schema with har-validator (npm),
// then prints what a reader of it would look for.
//
// usage: node har_check.mjs '{"file": PATH}'
// prints one JSON line: {valid, error, entries: [{method, url, status}]}

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(new URL('../../web/package.json', import.meta.url));
const validate = require('har-validator');

const cfg = JSON.parse(process.argv[2] ?? '{}');
const har = JSON.parse(readFileSync(cfg.file, 'utf8'));
const out = { valid: false, error: null, entries: [] };
try {
  await validate.har(har);
  out.valid = true;
} catch (err) {
  out.error = JSON.stringify(err.errors ?? String(err));
}
out.entries = (har.log?.entries ?? []).map((e) => ({
  method: e.request.method, url: e.request.url, status: e.response.status,
}));
console.log(JSON.stringify(out));
