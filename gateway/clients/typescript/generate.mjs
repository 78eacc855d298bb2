// Writes the client's wire types (src/wire.ts) from the gateway's OpenAPI
// document with openapi-typescript (pinned in package.json, installed by
// scripts/setup). Run by scripts/clients; never edit src/wire.ts by hand.
//
//     node generate.mjs <openapi.json> <wire.ts>
//
// Two things in the document stop openapi-typescript outright; both are
// mended here, the same way each run, and the first is named on stderr:
// - a `$ref` to a schema the document does not hold is typed `unknown`
//   (the gateway should register it: today `StateFilter`, the `state`
//   filter of GET /v1/approvals and GET /v1/downloads);
// - operation ids repeat across tags (`list`, `get`, ...), as utoipa names
//   them after the handler: each is qualified by its tag (`workspaces/list`),
//   as openapi-python-client's modules are (`api/workspaces/list_`).
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
    delete node.$ref;
    node.description = `${node.description ?? ""} (the document's ${ref} is missing)`.trim();
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
  console.error(`generate.mjs: ${input}: ${ref} points to no schema; typed unknown until the gateway registers it`);
}
const ast = await openapiTS(document, { silent: true });
writeFileSync(output, COMMENT_HEADER + astToString(ast));
