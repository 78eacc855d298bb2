// The TypeScript client (gateway/clients/typescript), npm-installed from the
// repo path into a scratch project by tests/e2e/ts_client.rs, which copies
// this script there and runs it: every part of the client's surface a
// person would use against a real gateway, each asserted; then the round
// trip of one `act([click, type], { screenshot: true })` against the same
// actions as three calls, printed as a ratio (measured, never asserted).
//
// Environment: CUBICLE_URL, CUBICLE_TOKEN (an agent's), OPERATOR_TOKEN,
// WORKSPACE (a running workspace of the agent's, under a policy that holds
// `touch /home/user/held-*`). playwright-core is linked into the scratch
// project's node_modules from web/; using.js is compiled there from
// TypeScript by ts_client.rs.

import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";

import { Cubicle, Held, Screenshot, errors } from "cubicle-client";

import { madeAndDisposed } from "./using.js";

const WORKSPACE = process.env.WORKSPACE;
const operator = new Cubicle(undefined, process.env.OPERATOR_TOKEN);

async function checkWorkspaces(cubicle) {
  assert.equal((await cubicle.me()).role, "agent");
  assert.ok((await cubicle.list()).some((w) => w.id === WORKSPACE), "the workspace is listed");
  const ws = await cubicle.connect(WORKSPACE);
  assert.equal(ws.record.state, "running");

  let madeId;
  const echoed = await cubicle.withWorkspace({ name: "ts-client" }, async (made) => {
    madeId = made.id;
    assert.equal(made.record.state, "running", JSON.stringify(made.record));
    return (await made.exec(["echo", "new"])).stdout;
  });
  assert.equal(echoed, "new\n");
  await assert.rejects(cubicle.connect(madeId), errors.NotFound, "withWorkspace left the workspace");

  // `await using` (TypeScript, compiled by tsc: using.ts in ts_client.rs).
  const used = await madeAndDisposed(cubicle);
  assert.equal(used.stdout, "used\n");
  await assert.rejects(cubicle.connect(used.id), errors.NotFound, "await using left the workspace");
  return ws;
}

async function checkScreen(ws) {
  const shot = await ws.screenshot();
  assert.ok(shot instanceof Screenshot);
  assert.deepEqual([...shot.data.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], "a PNG");
  assert.ok(shot.width > 0 && shot.height > 0, `${shot.width}x${shot.height}`);
  assert.equal(shot.mediaType, "image/png");
  const jpeg = await ws.screenshot({ format: "jpeg", quality: 60 });
  assert.deepEqual([...jpeg.data.subarray(0, 2)], [0xff, 0xd8], "a JPEG");
  assert.deepEqual([jpeg.width, jpeg.height], [shot.width, shot.height]);

  const results = await ws.act(
    [{ action: "mouse_move", coordinate: [100, 100] }, { type: "click", x: 100, y: 100 }],
    { screenshot: true },
  );
  assert.ok(Array.isArray(results) && results.length === 3, JSON.stringify(results));
  const last = results[2];
  assert.ok(last instanceof Screenshot && last.width === shot.width && last.data[0] === 0x89, "act's screenshot");
  assert.ok(!(await ws.leftClick(50, 50) instanceof Held));
  await ws.key("Escape");
  await ws.mouseMove(60, 60);
}

async function checkExec(ws) {
  const done = await ws.exec(["sh", "-c", "echo hi; echo oops >&2; exit 3"]);
  assert.deepEqual([done.exitCode, done.stdout, done.stderr, done.timedOut], [3, "hi\n", "oops\n", false]);
  assert.equal((await ws.exec("tr a-z A-Z", { stdin: "shout" })).stdout, "SHOUT");
  assert.equal((await ws.exec("wc -c", { stdin: new Uint8Array(1000) })).stdout.trim(), "1000");
  const slow = await ws.exec(["sleep", "5"], { timeout: 500 });
  assert.ok(slow.timedOut && slow.signal === 9, JSON.stringify(slow.raw));

  const streamed = [];
  for await (const chunk of ws.execStream(["sh", "-c", "cat; echo done >&2"], { stdin: "piped\n" })) streamed.push(chunk);
  const text = (kind) => streamed.filter((c) => c.kind === kind).map((c) => c.text).join("");
  assert.equal(text("stdout"), "piped\n");
  assert.equal(text("stderr"), "done\n");
  assert.deepEqual(streamed.at(-1), { kind: "exit", exitCode: 0, signal: null, timedOut: false, durationMs: streamed.at(-1).durationMs });

  // Output streams while the command runs: the second line of stdin is
  // only sent once `cat` echoed the first (buffered to the end, this would
  // wait until the command's timeout killed it).
  let echoedFirst;
  const firstBack = new Promise((resolve) => (echoedFirst = resolve));
  async function* lines() {
    yield "one\n";
    await firstBack;
    yield new TextEncoder().encode("two\n");
  }
  let out = "";
  let exit;
  for await (const chunk of ws.execStream("cat", { stdin: lines(), timeout: 60_000 })) {
    if (chunk.kind === "stdout") out += chunk.text;
    if (out.includes("one\n")) echoedFirst();
    if (chunk.kind === "exit") exit = chunk;
  }
  assert.equal(out, "one\ntwo\n");
  assert.ok(exit && exit.exitCode === 0 && !exit.timedOut, JSON.stringify(exit));
}

async function checkFiles(ws) {
  const data = new Uint8Array(25_600).map((_, i) => i % 256);
  assert.equal(await ws.writeFile("/home/user/from-ts.bin", data), undefined);
  assert.deepEqual(await ws.readFile("/home/user/from-ts.bin"), data);
  await ws.writeFile("/home/user/from-ts.txt", "text\n", { mode: "0600" });
  const entries = await ws.listFiles("/home/user");
  const bin = entries.find((e) => e.name === "from-ts.bin");
  assert.ok(bin && bin.size === 25_600 && bin.type === "file", JSON.stringify(entries));
  assert.equal(entries.find((e) => e.name === "from-ts.txt")?.mode, 0o600);
  await ws.deleteFile("/home/user/from-ts.bin");
  await ws.deleteFile("/home/user/from-ts.txt");
  const gone = await ws.readFile("/home/user/from-ts.bin").catch((error) => error);
  assert.ok(gone instanceof errors.NotFound && gone.code === "not_found" && gone.status === 404, String(gone));
}

async function checkHeld(cubicle, ws) {
  // Held: a result, not an exception; decided by an operator, then sent
  // again with the approval.
  const held = await ws.exec(["touch", "/home/user/held-ts"]);
  assert.ok(held instanceof Held, JSON.stringify(held));
  assert.match(held.approvalId, /^apr-/);
  assert.equal(held.url, `${cubicle.url}/v1/approvals/${held.approvalId}`);
  assert.equal(held.rule, "held#held-files");
  assert.equal(held.reason, "making a held file");
  assert.ok(held.expiresAt > Date.now(), `${held.expiresAt}`);
  assert.match(held.message, /approval/);
  const pending = await operator.approvals();
  assert.ok(pending.some((a) => a.id === held.approvalId && a.operation === "exec"), JSON.stringify(pending));
  const stillPending = await cubicle.waitForApproval(held.approvalId, { timeout: 100 });
  assert.equal(stillPending.state, "pending");
  await operator.approve(held.approvalId, "ts client test");
  const decided = await held.waitFor({ timeout: 30_000 });
  assert.equal(decided.state, "approved", JSON.stringify(decided));
  const again = await ws.exec(["touch", "/home/user/held-ts"], { approval: held.approvalId });
  assert.ok(!(again instanceof Held) && again.exitCode === 0, JSON.stringify(again));
  assert.equal((await ws.exec(["test", "-f", "/home/user/held-ts"])).exitCode, 0, "the approved command ran");

  // The streamed form is held the same way, before anything runs.
  const chunks = [];
  for await (const chunk of ws.execStream(["touch", "/home/user/held-ts-stream"])) chunks.push(chunk);
  assert.equal(chunks.length, 1, JSON.stringify(chunks));
  assert.equal(chunks[0].kind, "held");
  assert.ok(chunks[0].held instanceof Held && chunks[0].held.approvalId.startsWith("apr-"));
  const approval = chunks[0].held.approvalId;
  await operator.deny(approval, "not this one");
  const denied = await (async () => {
    for await (const chunk of ws.execStream(["touch", "/home/user/held-ts-stream"], { approval })) return chunk;
  })().catch((error) => error);
  assert.ok(denied instanceof errors.Forbidden && denied.code === "denied", String(denied));
  assert.match(denied.apiMessage, /not this one/);

  // Asking a person to confirm a step: an approval, nothing held behind it.
  const asked = await ws.ask("Submit the order?", { details: { total: "12 EUR" }, expiresIn: 60_000, wait: 100 });
  assert.equal(asked.state, "pending", JSON.stringify(asked));
  assert.equal(asked.operation, "ask");
  await operator.approve(asked.id, "go ahead");
  assert.equal((await cubicle.waitForApproval(asked.id, { timeout: 30_000 })).state, "approved");
}

async function checkLifecycle(ws) {
  assert.equal((await ws.pause()).state, "paused");
  const refused = await ws.exec(["true"]).catch((error) => error);
  assert.ok(refused instanceof errors.Conflict && refused.code === "paused", String(refused));
  assert.equal((await ws.resume()).state, "running");
  assert.equal((await ws.exec(["echo", "back"])).stdout, "back\n");
  assert.equal((await ws.refresh()).state, "running");
}

async function checkEvents(cubicle, ws) {
  const events = await operator.events({ workspace: WORKSPACE, limit: 1000 });
  const kinds = new Set(events.map((e) => e.kind));
  for (const kind of ["exec", "file.write", "approval.request", "approval.approve", "workspace.pause"]) {
    assert.ok(kinds.has(kind), `${kind} in ${[...kinds]}`);
  }
  assert.ok(events.every((e) => e.workspace_id === WORKSPACE));
  const followed = operator.followEvents({ workspace: WORKSPACE, after: events.at(-1).id - 1 });
  assert.equal((await followed.next()).value.id, events.at(-1).id);
  await followed.return();
  const forbidden = await ws.events().catch((error) => error);
  assert.ok(forbidden instanceof errors.Forbidden && forbidden.status === 403, String(forbidden));
  assert.match(forbidden.apiMessage, /cannot/);
  assert.deepEqual(await cubicle.downloads(), []);
}

async function checkBrowser(ws) {
  const version = await (await fetch(`${ws.cdpUrl()}/json/version`, { headers: ws.cdpHeaders() })).json();
  assert.ok("Browser" in version && version.webSocketDebuggerUrl.startsWith("ws"), JSON.stringify(version));
  // No chromium given: connectPlaywright finds playwright-core from the working directory.
  const browser = await ws.connectPlaywright();
  try {
    const page = await browser.contexts()[0].newPage();
    await page.goto(`data:text/html,${encodeURIComponent("<title>from the ts client</title>")}`);
    assert.equal(await page.title(), "from the ts client");
    assert.equal(await page.evaluate(() => 6 * 7), 42);
    await page.close();
  } finally {
    await browser.close();
  }
  const live = new URL(ws.liveViewUrl());
  assert.equal(live.hash, `#${WORKSPACE}`);
  assert.equal(live.searchParams.get("token"), process.env.CUBICLE_TOKEN);
}

async function checkErrors(cubicle) {
  const wrongToken = await new Cubicle(undefined, "cubicle_wrong").list().catch((error) => error);
  assert.ok(wrongToken instanceof errors.Unauthorized && wrongToken.status === 401, String(wrongToken));
  assert.equal(wrongToken.code, "unauthorized");
  assert.match(wrongToken.message, /token is not valid.*CUBICLE_TOKEN/);

  const missing = await cubicle.connect("ws-000000000000").catch((error) => error);
  assert.ok(missing instanceof errors.NotFound, String(missing));
  assert.deepEqual([missing.status, missing.code], [404, "not_found"]);

  // A wrong URL: nothing listening there ...
  const port = await closedPort();
  const nobody = await new Cubicle(`http://127.0.0.1:${port}`, "cubicle_x").list().catch((error) => error);
  assert.ok(nobody instanceof errors.Unreachable && nobody.status === 0, String(nobody));
  assert.match(nobody.message, new RegExp(`127\\.0\\.0\\.1:${port}.*ECONNREFUSED.*cubicle serve`));
  // ... or something that is not the gateway.
  const other = http.createServer((_, res) => res.writeHead(404, { "content-type": "text/html" }).end("<h1>Not Found</h1>"));
  await new Promise((resolve) => other.listen(0, "127.0.0.1", resolve));
  const otherUrl = `http://127.0.0.1:${other.address().port}`;
  const notCubicle = await new Cubicle(otherUrl, "cubicle_x").connect("ws-1").catch((error) => error);
  other.close();
  assert.ok(notCubicle instanceof errors.NotCubicle && notCubicle.status === 404, String(notCubicle));
  assert.match(notCubicle.message, /is not a Cubicle gateway.*Not Found.*CUBICLE_URL/);

  const token = process.env.CUBICLE_TOKEN;
  delete process.env.CUBICLE_TOKEN;
  try {
    assert.throws(() => new Cubicle(), (error) => error instanceof errors.ConfigError && /CUBICLE_TOKEN/.test(error.message));
  } finally {
    process.env.CUBICLE_TOKEN = token;
  }
  assert.throws(() => new Cubicle("127.0.0.1:7878"), errors.ConfigError);
}

/** A local port nothing listens on. */
async function closedPort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function measure(ws) {
  const click = { action: "left_click", coordinate: [640, 700] };
  const typing = { action: "type", text: "a" };
  const one = [];
  const separate = [];
  for (let i = 0; i < 15; i++) {
    let start = performance.now();
    await ws.act([click, typing], { screenshot: true });
    one.push(performance.now() - start);
    start = performance.now();
    await ws.act([click]);
    await ws.act([typing]);
    await ws.screenshot();
    separate.push(performance.now() - start);
  }
  const p50 = (samples) => samples.sort((a, b) => a - b)[Math.floor(samples.length / 2)];
  return {
    act_one_request_p50_ms: p50(one),
    separate_calls_p50_ms: p50(separate),
    separate_over_one: p50(separate) / p50(one),
  };
}

const cubicle = new Cubicle();
const ws = await checkWorkspaces(cubicle);
await checkScreen(ws);
await checkExec(ws);
await checkFiles(ws);
await checkHeld(cubicle, ws);
await checkLifecycle(ws);
await checkEvents(cubicle, ws);
await checkBrowser(ws);
await checkErrors(cubicle);
console.log(`measured: ${JSON.stringify(await measure(ws))}`);
console.log("ts client: ok");
