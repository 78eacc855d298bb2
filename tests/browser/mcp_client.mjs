// The official MCP TypeScript SDK as a real client of Cubicle's MCP server,
// over Streamable HTTP (`<gateway>/v1/mcp` with a Bearer token) or over
// stdio (launching `cubicle mcp --url ... --token ...`).
//
// usage: node mcp_client.mjs http  <gateway> <token> <workspace> [measure_n]
//        node mcp_client.mjs stdio <gateway> <token> <workspace> <cubicle binary>
//
// Lists the tools, takes a screenshot with `computer`, runs `echo mcp-ok`
// with `exec`, makes one call with a bad argument, and prints one JSON line.
// With measure_n (http mode), also times n MCP screenshot calls and n plain
// `POST /actions` screenshots, interleaved, and adds both lists of ms.
//
// The SDK comes from web/node_modules (`npm ci` in web/).

import { createRequire } from 'node:module';

const require = createRequire(new URL('../../web/package.json', import.meta.url));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const [mode, gateway, token, workspace, extra] = process.argv.slice(2);
if (!['http', 'stdio'].includes(mode) || !gateway || !token || !workspace) {
  console.error('usage: node mcp_client.mjs http|stdio <gateway> <token> <workspace> [measure_n | cubicle]');
  process.exit(2);
}

function transport() {
  if (mode === 'http') {
    return new StreamableHTTPClientTransport(new URL('/v1/mcp', gateway), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
  }
  return new StdioClientTransport({
    command: extra,
    args: ['mcp', '--url', gateway, '--token', token],
    stderr: 'inherit',
  });
}

/// Width and height from a PNG's IHDR, or null if it is not a PNG.
function pngSize(base64) {
  const bytes = Buffer.from(base64, 'base64');
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (bytes.length < 24 || !bytes.subarray(0, 8).equals(signature)) return null;
  if (bytes.subarray(12, 16).toString('latin1') !== 'IHDR') return null;
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20), bytes: bytes.length };
}

function describe(result) {
  return (result.content ?? []).map((block) =>
    block.type === 'image'
      ? { type: 'image', mimeType: block.mimeType, png: pngSize(block.data) }
      : { type: block.type, text: block.text });
}

async function measure(client, n) {
  const mcp = [];
  const http = [];
  const body = JSON.stringify({ action: 'screenshot' });
  const headers = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
  for (let i = 0; i < n; i++) {
    let started = performance.now();
    const shot = await client.callTool({ name: 'computer', arguments: { workspace, action: 'screenshot' } });
    if (shot.isError || shot.content[0]?.type !== 'image') throw new Error(`MCP screenshot failed: ${JSON.stringify(describe(shot))}`);
    mcp.push(performance.now() - started);
    started = performance.now();
    const response = await fetch(new URL(`/v1/workspaces/${workspace}/actions`, gateway), { method: 'POST', headers, body });
    const answer = await response.json();
    if (response.status !== 200 || answer.result?.type !== 'image') throw new Error(`HTTP screenshot failed: ${response.status}`);
    http.push(performance.now() - started);
  }
  return { mcp_ms: mcp, http_ms: http };
}

const client = new Client({ name: 'cubicle-e2e', version: '1.0.0' });
await client.connect(transport());
try {
  const tools = await client.listTools();
  const shot = await client.callTool({ name: 'computer', arguments: { workspace, action: 'screenshot' } });
  const exec = await client.callTool({ name: 'exec', arguments: { workspace, command: 'echo mcp-ok' } });
  const bad = await client.callTool({ name: 'computer', arguments: { workspace, action: 'left_click', coordinate: [99999, 5] } });
  let unknownTool;
  try {
    await client.callTool({ name: 'no_such_tool', arguments: {} });
    unknownTool = { thrown: false };
  } catch (err) {
    unknownTool = { thrown: true, code: err.code, message: err.message };
  }
  const result = {
    server: client.getServerVersion(),
    tools: tools.tools.map((tool) => ({ name: tool.name, schemaType: tool.inputSchema?.type })),
    screenshot: { isError: shot.isError ?? false, content: describe(shot) },
    exec: { isError: exec.isError ?? false, content: describe(exec), structured: exec.structuredContent },
    bad: { isError: bad.isError ?? false, content: describe(bad) },
    unknownTool,
  };
  const n = Number(extra);
  if (mode === 'http' && n > 0) result.measure = await measure(client, n);
  console.log(JSON.stringify(result));
} finally {
  await client.close();
}
