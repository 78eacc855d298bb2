import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

import type { Cubicle, WorkspaceRecord } from "./cubicle.js";
import { NotFound } from "./errors.js";
import { type ExecChunk, type ExecResult, type StreamOptions, execResult, execStream } from "./exec.js";
import { Held } from "./held.js";
import { Screenshot } from "./screenshot.js";
import { type Approval, type Event, type FileEntry, asView } from "./views.js";
import type { components } from "./wire.js";

/**
 * One action, by its Anthropic (`action: "left_click"`) or OpenAI
 * (`type: "click"`) name; fields the document does not list (OpenAI's
 * `x`, `y`, `keys`, ...) go through as they are.
 */
export type Action = Omit<components["schemas"]["ActionRequest"], "actions"> & Record<string, unknown>;

/** What an action answers: a {@link Screenshot} for images, the API's JSON otherwise. */
export type ActionResult = Screenshot | unknown;

export interface ExecOptions {
  /** Milliseconds the command may run (default 30000); then it is killed. */
  timeout?: number;
  /** Sent whole on stdin, then closed. */
  stdin?: string | Uint8Array;
  cwd?: string;
  env?: Record<string, string>;
  /** The approval of an earlier {@link Held} answer to the same call. */
  approval?: string;
}

/**
 * The query of an operation a policy may hold: the gateway also takes
 * `approval` there, which the OpenAPI document does not list.
 */
function approvalQuery<Q>(query: Q, approval: string | undefined): Q {
  return (approval ? { ...query, approval } : query) as Q;
}

/**
 * One workspace. `await using ws = await cubicle.create()` (or
 * `cubicle.withWorkspace(...)`) deletes it when the block ends.
 */
export class Workspace {
  readonly id: string;

  constructor(
    private readonly cubicle: Cubicle,
    public record: WorkspaceRecord,
  ) {
    this.id = record.id;
  }

  toString(): string {
    return `<Workspace ${this.id} ${this.record.state}>`;
  }

  private get path() {
    return { path: { id: this.id } };
  }

  async refresh(): Promise<WorkspaceRecord> {
    const { data } = await this.cubicle.http.GET("/v1/workspaces/{id}", { params: this.path, ...this.cubicle.within() });
    this.record = data as WorkspaceRecord;
    return this.record;
  }

  /** Deletes it (a workspace already gone is no error). */
  async delete(): Promise<void> {
    try {
      await this.cubicle.http.DELETE("/v1/workspaces/{id}", { params: this.path, ...this.cubicle.within() });
    } catch (error) {
      if (!(error instanceof NotFound)) throw error;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.delete();
  }

  async pause(): Promise<WorkspaceRecord> {
    const { data } = await this.cubicle.http.POST("/v1/workspaces/{id}/pause", { params: this.path, ...this.cubicle.within() });
    return (this.record = data as WorkspaceRecord);
  }

  async resume(): Promise<WorkspaceRecord> {
    const { data } = await this.cubicle.http.POST("/v1/workspaces/{id}/resume", { params: this.path, ...this.cubicle.within() });
    return (this.record = data as WorkspaceRecord);
  }

  async stop(): Promise<WorkspaceRecord> {
    const { data } = await this.cubicle.http.POST("/v1/workspaces/{id}/stop", { params: this.path, ...this.cubicle.within() });
    return (this.record = data as WorkspaceRecord);
  }

  async start(): Promise<WorkspaceRecord> {
    const { data } = await this.cubicle.http.POST("/v1/workspaces/{id}/start", { params: this.path, ...this.cubicle.within() });
    return (this.record = data as WorkspaceRecord);
  }

  // --- the screen ------------------------------------------------------------

  /** The screen, through the gateway's own RFB session. */
  async screenshot(options: { format?: "png" | "jpeg"; quality?: number } = {}): Promise<Screenshot> {
    const { data, response } = await this.cubicle.http.GET("/v1/workspaces/{id}/screenshot", {
      params: { ...this.path, query: { format: options.format ?? "png", quality: options.quality } },
      parseAs: "arrayBuffer",
      ...this.cubicle.within(),
    });
    return Screenshot.fromBytes(new Uint8Array(data as ArrayBuffer), response.headers.get("content-type") ?? "");
  }

  /**
   * Runs `actions` in one request, in order; with `screenshot: true` a
   * screenshot is taken last, in the same request. Each action's result
   * (images as {@link Screenshot}), or {@link Held}.
   */
  async act(actions: Action[], options: { screenshot?: boolean; approval?: string } = {}): Promise<ActionResult[] | Held> {
    const batch = options.screenshot ? [...actions, { action: "screenshot" as const }] : actions;
    const answer = await this.cubicle.http.POST("/v1/workspaces/{id}/actions", {
      params: { ...this.path, query: approvalQuery(undefined, options.approval) },
      body: { actions: batch },
      ...this.cubicle.within(),
    });
    const done = this.cubicle.held(answer);
    if (done instanceof Held) return done;
    return (done?.results ?? []).map((result) => (isImage(result) ? Screenshot.fromResult(result) : result));
  }

  /** One action by its name: `await ws.action("left_click", { coordinate: [10, 20] })`. */
  async action(name: string, params: Record<string, unknown> = {}, options: { approval?: string } = {}): Promise<ActionResult | Held> {
    const results = await this.act([{ ...params, action: name } as Action], options);
    return Array.isArray(results) ? results[0] : results;
  }

  leftClick(x: number, y: number) {
    return this.action("left_click", { coordinate: [x, y] });
  }

  doubleClick(x: number, y: number) {
    return this.action("double_click", { coordinate: [x, y] });
  }

  rightClick(x: number, y: number) {
    return this.action("right_click", { coordinate: [x, y] });
  }

  mouseMove(x: number, y: number) {
    return this.action("mouse_move", { coordinate: [x, y] });
  }

  type(text: string) {
    return this.action("type", { text });
  }

  /** xdotool-style key names: `"ctrl+l"`, `"Return"`. */
  key(keys: string) {
    return this.action("key", { text: keys });
  }

  scroll(x: number, y: number, direction: "up" | "down" | "left" | "right" = "down", amount = 3) {
    return this.action("scroll", { coordinate: [x, y], scroll_direction: direction, scroll_amount: amount });
  }

  // --- shell and files -------------------------------------------------------

  /**
   * Runs a command as the workspace's user (`argv`, or a shell line as a
   * string) and answers when it ends, or {@link Held}.
   */
  async exec(argv: string[] | string, options: ExecOptions = {}): Promise<ExecResult | Held> {
    const timeout = options.timeout ?? 30_000;
    const body: components["schemas"]["ExecBody"] = { timeout_ms: timeout, cwd: options.cwd, env: options.env };
    if (typeof argv === "string") body.command = argv;
    else body.argv = argv;
    if (typeof options.stdin === "string") body.stdin = options.stdin;
    else if (options.stdin) body.stdin_base64 = Buffer.from(options.stdin).toString("base64");
    const answer = await this.cubicle.http.POST("/v1/workspaces/{id}/exec", {
      params: { ...this.path, query: approvalQuery(undefined, options.approval) },
      body,
      ...this.cubicle.within(timeout + 30_000),
    });
    const done = this.cubicle.held(answer);
    return done instanceof Held ? done : execResult(done as components["schemas"]["ExecResult"]);
  }

  /**
   * Streams a command's output as it comes, over the gateway's exec
   * WebSocket: yields `{kind: "stdout" | "stderr", text}` and last
   * `{kind: "exit", exitCode, signal, ...}`; or one `{kind: "held", held}`
   * when a policy holds it. `stdin` is sent as it comes (a string, bytes,
   * or an async iterable of either), then closed.
   */
  execStream(argv: string[] | string, options: StreamOptions = {}): AsyncGenerator<ExecChunk> {
    return execStream(this.cubicle, this.id, argv, options);
  }

  async readFile(path: string): Promise<Uint8Array> {
    const { data } = await this.cubicle.http.GET("/v1/workspaces/{id}/files", {
      params: { ...this.path, query: { path } },
      parseAs: "arrayBuffer",
      ...this.cubicle.within(),
    });
    return new Uint8Array(data as ArrayBuffer);
  }

  /** Creates or replaces a file (up to 16 MiB); `mode` is octal text (`"0644"`). */
  async writeFile(path: string, data: Uint8Array | string, options: { mode?: string; approval?: string } = {}): Promise<Held | undefined> {
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    const answer = await this.cubicle.http.PUT("/v1/workspaces/{id}/files", {
      params: { ...this.path, query: approvalQuery({ path, mode: options.mode }, options.approval) },
      // The document types the body as an array of integers (utoipa's view
      // of bytes); the bytes go as they are.
      body: bytes as unknown as number[],
      bodySerializer: (body: unknown) => body as Uint8Array,
      headers: { "content-type": "application/octet-stream" },
      ...this.cubicle.within(),
    });
    const done = this.cubicle.held(answer);
    return done instanceof Held ? done : undefined;
  }

  async listFiles(path: string): Promise<FileEntry[]> {
    const { data } = await this.cubicle.http.GET("/v1/workspaces/{id}/files/list", {
      params: { ...this.path, query: { path } },
      ...this.cubicle.within(),
    });
    return asView<{ entries: FileEntry[] }>(data).entries;
  }

  async deleteFile(path: string, options: { recursive?: boolean; approval?: string } = {}): Promise<Held | undefined> {
    const answer = await this.cubicle.http.DELETE("/v1/workspaces/{id}/files", {
      params: { ...this.path, query: approvalQuery({ path, recursive: options.recursive }, options.approval) },
      ...this.cubicle.within(),
    });
    const done = this.cubicle.held(answer);
    return done instanceof Held ? done : undefined;
  }

  /**
   * Asks a person to confirm a step before the agent takes it (a model's
   * safety check, say): an approval operators decide like a held
   * operation; nothing runs when it is approved. Waits up to `wait`
   * milliseconds for the decision (default 0); the approval's `state` says
   * pending, approved, denied or expired (`cubicle.waitForApproval` waits
   * on). `expiresIn`: milliseconds a person has (default 600000; whole
   * seconds on the wire).
   */
  async ask(
    question: string,
    options: { details?: Record<string, unknown>; expiresIn?: number; wait?: number } = {},
  ): Promise<Approval> {
    const wait = options.wait ?? 0;
    const { data } = await this.cubicle.http.POST("/v1/workspaces/{id}/approvals", {
      params: { ...this.path, query: wait > 0 ? { wait: wait / 1000 } : {} },
      body: {
        question,
        details: options.details as Record<string, never> | undefined,
        expires_in_seconds: options.expiresIn === undefined ? undefined : Math.ceil(options.expiresIn / 1000),
      },
      ...this.cubicle.within(wait + 30_000),
    });
    return asView<Approval>(data);
  }

  // --- browser and live view -------------------------------------------------

  /** The CDP endpoint of the workspace's browser (send {@link cdpHeaders} with it). */
  cdpUrl(): string {
    return `${this.cubicle.url}/v1/workspaces/${encodeURIComponent(this.id)}/cdp`;
  }

  cdpHeaders(): Record<string, string> {
    return { Authorization: `Bearer ${this.cubicle.token}` };
  }

  /**
   * The workspace's browser in Playwright, through the gateway's CDP proxy:
   * `await ws.connectPlaywright(chromium)` with `chromium` from
   * `playwright-core` (or `playwright`); without it, `playwright-core` is
   * looked for from the working directory, then from this package.
   */
  async connectPlaywright<Browser = unknown>(chromium?: CdpConnector<Browser>): Promise<Browser> {
    const connector = chromium ?? (await findChromium<Browser>());
    return connector.connectOverCDP(this.cdpUrl(), { headers: this.cdpHeaders() });
  }

  /** The operator page showing this workspace (it logs in with the token once, then keeps a cookie). */
  liveViewUrl(): string {
    return `${this.cubicle.url}/?${new URLSearchParams({ token: this.cubicle.token })}#${this.id}`;
  }

  events(options: { after?: number; limit?: number } = {}): Promise<Event[]> {
    return this.cubicle.events({ ...options, workspace: this.id });
  }
}

/** What `connectPlaywright` needs of Playwright's `chromium`. */
export interface CdpConnector<Browser> {
  connectOverCDP(endpointURL: string, options?: { headers?: Record<string, string> }): Promise<Browser>;
}

type Playwright<Browser> = { chromium?: CdpConnector<Browser> };

async function findChromium<Browser>(): Promise<CdpConnector<Browser>> {
  for (const from of [`${process.cwd()}/`, import.meta.url]) {
    try {
      const found = pathToFileURL(createRequire(from).resolve("playwright-core")).href;
      const module = (await import(found)) as Playwright<Browser> & { default?: Playwright<Browser> };
      const chromium = module.chromium ?? module.default?.chromium;
      if (chromium) return chromium;
    } catch {
      // not installed there
    }
  }
  throw new Error("playwright-core is not installed: `npm install playwright-core`, or pass its chromium to connectPlaywright");
}

function isImage(result: unknown): result is Record<string, unknown> {
  return typeof result === "object" && result !== null && (result as { type?: unknown }).type === "image";
}
