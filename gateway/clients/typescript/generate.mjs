// Writes the client's wire types (src/wire.ts) from the gateway's OpenAPI
// document with openapi-typescript (pinned in package.json, installed by
// scripts/setup). Run by scripts/clients; never edit src/wire.ts by hand.
//
//     node generate.mjs <openapi.json> <wire.ts>
//
// Operation ids repeat across tags (`list`, `get`, ...), as utoipa names
// them after the handler, which openapi-typescript refuses: each is
// qualified by its tag here (`workspaces/list`), as openapi-python-client's
// modules are (`api/workspaces/list_`). A `$ref` to a schema the document
// does not hold is an error (the gateway's own test refuses one too).
import { readFileSync, writeFileSync } from "node:fs";
import openapiTS, { astToString, COMMENT_HEADER } from "openapi-typescript";

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: node generate.mjs <openapi.json> <wire.ts>");
  process.exit(2);
}
const document = JSON.parse(readFileSync(input, "utf8"));
const schemas = document.components?.schemas ?? {};
const dangling = new Set();

function untangle(node, at) {
  if (Array.isArray(node)) {
    node.forEach((item, i) => untangle(item, `${at}/${i}`));
    return;
  }
  if (node === null || typeof node !== "object") return;
  const ref = node.$ref;
  const name = typeof ref === "string" && ref.startsWith("#/components/schemas/")
    ? ref.slice("#/components/schemas/".length)
    : undefined;
  if (name !== undefined && !(name in schemas)) {
    dangling.add(`${ref} (at ${at})`);
    return;
  }
  for (const [key, value] of Object.entries(node)) untangle(value, `${at}/${key}`);
}

untangle(document, "#");
const ids = new Map();
for (const [path, item] of Object.entries(document.paths ?? {})) {
  for (const [method, operation] of Object.entries(item)) {
    if (typeof operation?.operationId !== "string") continue;
    const id = `${operation.tags?.[0] ?? "untagged"}/${operation.operationId}`;
    if (ids.has(id)) {
      console.error(`generate.mjs: ${input}: ${method} ${path} and ${ids.get(id)} are both ${id}`);
      process.exit(1);
    }
    ids.set(id, `${method} ${path}`);
    operation.operationId = id;
  }
}
for (const ref of dangling) {
  console.error(`generate.mjs: ${input}: ${ref} points to no schema: register it in the gateway's openapi.rs`);
}
if (dangling.size) process.exit(1);
const ast = await openapiTS(document, { silent: true });
writeFileSync(output, COMMENT_HEADER + astToString(ast));
