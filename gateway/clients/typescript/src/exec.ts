/**
 * A command's answer, and its streamed form over the gateway's exec
 * WebSocket (`GET /v1/workspaces/{id}/exec/ws`): the server sends JSON
 * text frames `{"stdout": text}` / `{"stderr": text}` (plus `*_base64` when
 * a chunk is not UTF-8), then `{"exit_code", "signal", "timed_out",
 * "duration_ms"}` and closes, or `{"error": {code, message}}`; the client
 * sends `{"stdin": text}` or binary frames, then `{"stdin_eof": true}`.
 * Closing the socket kills the command. Node 20 has no WebSocket of its
 * own without a flag: this uses `ws`.
 */
import type { IncomingMessage } from "node:http";
import WebSocket from "ws";

import type { Cubicle } from "./cubicle.js";
import { CubicleError, NotCubicle, Unreachable, fromAnswer, isObject } from "./errors.js";
import type { Held } from "./held.js";
import type { components } from "./wire.js";

export interface ExecResult {
  /** Absent when a signal ended it. */
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  signal: number | null;
  durationMs: number;
  /** The API's answer as it came (`stdout_base64`, `*_truncated`, ...). */
  raw: components["schemas"]["ExecResult"];
}

export function execResult(raw: components["schemas"]["ExecResult"]): ExecResult {
  return {
    exitCode: raw.exit_code ?? null,
    stdout: raw.stdout,
    stderr: raw.stderr,
    timedOut: raw.timed_out,
    signal: raw.signal ?? null,
    durationMs: raw.duration_ms,
    raw,
  };
}

export type ExecChunk =
  | { kind: "stdout" | "stderr"; text: string; /** The exact bytes, when they are not UTF-8. */ bytes?: Uint8Array }
  | { kind: "exit"; exitCode: number | null; signal: number | null; timedOut: boolean; durationMs: number }
  | { kind: "held"; held: Held };

export interface StreamOptions {
  /** Sent as it comes, then closed: text, bytes, or an async iterable of either. */
  stdin?: string | Uint8Array | AsyncIterable<string | Uint8Array>;
  /** Milliseconds the command may run (default 600000). */
  timeout?: number;
  cwd?: string;
  env?: Record<string, string>;
  /** The approval of an earlier held answer to the same call. */
  approval?: string;
}

/** What the socket delivers, in order: a chunk, the end, or a failure. */
type Item = { chunk: ExecChunk } | { end: true } | { error: unknown };

export async function* execStream(
  cubicle: Cubicle,
  workspaceId: string,
  argv: string[] | string,
  options: StreamOptions,
): AsyncGenerator<ExecChunk> {
  const query = new URLSearchParams({ timeout_ms: String(options.timeout ?? 600_000) });
  if (typeof argv === "string") query.append("command", argv);
  else for (const arg of argv) query.append("arg", arg);
  if (options.cwd) query.append("cwd", options.cwd);
  for (const [name, value] of Object.entries(options.env ?? {})) query.append("env", `${name}=${value}`);
  if (options.approval) query.append("approval", options.approval);
  const path = `/v1/workspaces/${encodeURIComponent(workspaceId)}/exec/ws`;
  const what = `GET ${path}`;
  const socket = new WebSocket(`${cubicle.url.replace(/^http/, "ws")}${path}?${query}`, {
    headers: { authorization: `Bearer ${cubicle.token}` },
    handshakeTimeout: cubicle.timeout,
  });

  const items: Item[] = [];
  let wake: (() => void) | undefined;
  const push = (item: Item) => {
    items.push(item);
    wake?.();
  };
  socket.on("message", (data, isBinary) => {
    try {
      const chunk = isBinary ? undefined : chunkOf(JSON.parse(data.toString()));
      if (chunk) push({ chunk });
    } catch (error) {
      push({ error });
    }
  });
  socket.on("unexpected-response", (_request, response) => {
    answerOf(cubicle, what, response).then(push, (error) => push({ error }));
  });
  socket.on("error", (error) => {
    push({
      error: new Unreachable(what, 0, "unreachable",
        `cannot open the exec socket at ${cubicle.url} (${error.message}); is \`cubicle serve\` running there, and is the URL (CUBICLE_URL) right?`),
    });
  });
  socket.on("close", () => push({ end: true }));
  socket.on("open", () => {
    sendStdin(socket, options.stdin).catch((error) => push({ error }));
  });

  try {
    for (;;) {
      const item = items.shift();
      if (!item) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      if ("error" in item) throw item.error;
      if ("end" in item) return;
      yield item.chunk;
      if (item.chunk.kind === "held") return;
    }
  } finally {
    socket.removeAllListeners();
    socket.on("error", () => {}); // a close racing a failed handshake
    if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING) socket.terminate();
  }
}

async function sendStdin(socket: WebSocket, stdin: StreamOptions["stdin"]): Promise<void> {
  const frame = (data: string | Uint8Array) =>
    new Promise<void>((resolve, reject) => socket.send(data, (error) => (error ? reject(error) : resolve())));
  const piece = (data: string | Uint8Array) => frame(typeof data === "string" ? JSON.stringify({ stdin: data }) : data);
  if (typeof stdin === "string" || stdin instanceof Uint8Array) await piece(stdin);
  else if (stdin) for await (const data of stdin) await piece(data);
  await frame(JSON.stringify({ stdin_eof: true }));
}

function chunkOf(message: unknown): ExecChunk | undefined {
  if (!isObject(message)) return undefined;
  if (isObject(message.error)) {
    const { code, message: text } = message.error;
    throw new CubicleError("exec stream", 0, String(code ?? ""), String(text ?? ""), message);
  }
  for (const kind of ["stdout", "stderr"] as const) {
    if (typeof message[kind] === "string") {
      const raw = message[`${kind}_base64`];
      const bytes = typeof raw === "string" ? new Uint8Array(Buffer.from(raw, "base64")) : undefined;
      return { kind, text: message[kind] as string, ...(bytes ? { bytes } : {}) };
    }
  }
  if ("exit_code" in message || "signal" in message) {
    return {
      kind: "exit",
      exitCode: typeof message.exit_code === "number" ? message.exit_code : null,
      signal: typeof message.signal === "number" ? message.signal : null,
      timedOut: message.timed_out === true,
      durationMs: Number(message.duration_ms ?? 0),
    };
  }
  return undefined;
}

/** The upgrade answered without upgrading: a 202 is held, anything else an error. */
async function answerOf(cubicle: Cubicle, what: string, response: IncomingMessage): Promise<Item> {
  const parts: Buffer[] = [];
  for await (const part of response) parts.push(part as Buffer);
  const text = Buffer.concat(parts).toString();
  const status = response.statusCode ?? 0;
  if (!response.headers["x-request-id"]) {
    return { error: new NotCubicle(what, status, "not_cubicle", `what answered at ${cubicle.url} is not a Cubicle gateway (${JSON.stringify(text.slice(0, 200))})`) };
  }
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: kept as text
  }
  if (status === 202) {
    return { chunk: { kind: "held", held: cubicle.heldOf(body) } };
  }
  return { error: fromAnswer(what, status, body) };
}
