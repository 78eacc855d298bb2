/**
 * A gateway as one token sees it, and the transport every call goes
 * through: requests are built by openapi-fetch from the generated wire
 * types (src/wire.ts: paths, methods, parameters and bodies come from the
 * gateway's OpenAPI document); the middleware here turns answers that are
 * not the gateway's, refusals and network failures into typed errors, and
 * {@link Cubicle.held} turns a 202 into a {@link Held} result.
 */
import createClient, { type Client, type Middleware } from "openapi-fetch";

import { ConfigError, CubicleError, NotCubicle, Unreachable, fromAnswer, isObject } from "./errors.js";
import { Held } from "./held.js";
import { type Approval, type Event, type Me, asView } from "./views.js";
import type { components, paths } from "./wire.js";
import { Workspace } from "./workspace.js";

export type CreateWorkspace = components["schemas"]["CreateWorkspace"];
export type WorkspaceRecord = components["schemas"]["WorkspaceView"];
export type Download = components["schemas"]["DownloadView"];
type ErrorBody = components["schemas"]["ErrorBody"];

export const DEFAULT_URL = "http://127.0.0.1:7878";

export interface CubicleOptions {
  /**
   * Milliseconds any one request may take (default 180000: a create waits
   * for the desktop). Calls that wait longer by design (exec with a longer
   * `timeout`, waiting for an approval) extend it for themselves.
   */
  timeout?: number;
}

/**
 * A gateway, as one token sees it.
 *
 * `url` and `token` default to `CUBICLE_URL` and `CUBICLE_TOKEN` (and the
 * URL to http://127.0.0.1:7878). Every timeout is in milliseconds.
 */
export class Cubicle {
  readonly url: string;
  readonly token: string;
  readonly timeout: number;
  /** @internal */
  readonly http: Client<paths>;

  constructor(url?: string, token?: string, options: CubicleOptions = {}) {
    const base = (url || process.env.CUBICLE_URL || DEFAULT_URL).replace(/\/+$/, "");
    const secret = token || process.env.CUBICLE_TOKEN;
    if (!/^https?:\/\//.test(base)) {
      throw new ConfigError(`url ${JSON.stringify(base)} is not an http:// or https:// URL of a cubicle gateway`);
    }
    if (!secret) {
      throw new ConfigError(
        "no token: pass new Cubicle(url, token) or set CUBICLE_TOKEN (`cubicle serve` prints the first admin token)",
      );
    }
    this.url = base;
    this.token = secret;
    this.timeout = options.timeout ?? 180_000;
    this.http = createClient<paths>({ baseUrl: base, headers: { authorization: `Bearer ${secret}` } });
    this.http.use(answers(base));
  }

  /** @internal The abort signal of a request that may take `ms` (at least the client's timeout). */
  within(ms = 0): { signal: AbortSignal } {
    return { signal: AbortSignal.timeout(Math.max(ms, this.timeout)) };
  }

  /** @internal A 202's body as {@link Held}; any other answer's data as it is. */
  held<T>(answer: { data?: T; response: Response }): Exclude<T, ErrorBody> | Held {
    return answer.response.status === 202 ? this.heldOf(answer.data) : (answer.data as Exclude<T, ErrorBody>);
  }

  /** @internal The body of a 202 `held` answer as {@link Held}. */
  heldOf(body: unknown): Held {
    const approval = isObject(body) && isObject(body.approval) ? body.approval : {};
    const error = isObject(body) && isObject(body.error) ? body.error : {};
    const path = String(approval.url ?? "");
    return new Held(
      String(approval.id ?? ""),
      path.startsWith("/") ? this.url + path : path,
      String(approval.reason ?? ""),
      String(approval.rule ?? ""),
      Number(approval.expires_at ?? 0),
      String(error.message ?? ""),
      (id, timeout) => this.waitForApproval(id, { timeout }),
    );
  }

  // --- workspaces ----------------------------------------------------------

  /**
   * A new workspace, once its desktop answers. `body` is the create body
   * (`name`, `geometry`, `template`, `egress`, `limits`, `time_limits`, ...).
   */
  async create(body: CreateWorkspace = {}): Promise<Workspace> {
    const { data } = await this.http.POST("/v1/workspaces", { body, ...this.within() });
    return new Workspace(this, data as WorkspaceRecord);
  }

  async connect(workspaceId: string): Promise<Workspace> {
    const { data } = await this.http.GET("/v1/workspaces/{id}", {
      params: { path: { id: workspaceId } },
      ...this.within(),
    });
    return new Workspace(this, data as WorkspaceRecord);
  }

  async list(): Promise<Workspace[]> {
    const { data } = await this.http.GET("/v1/workspaces", this.within());
    return (data?.workspaces ?? []).map((record) => new Workspace(this, record));
  }

  /**
   * Creates a workspace, runs `fn` with it and deletes it when `fn` ends,
   * however it ends; `fn`'s result. (`await using ws = await
   * cubicle.create()` does the same where `await using` compiles.)
   */
  async withWorkspace<T>(body: CreateWorkspace, fn: (workspace: Workspace) => Promise<T>): Promise<T> {
    const workspace = await this.create(body);
    try {
      return await fn(workspace);
    } finally {
      await workspace.delete();
    }
  }

  async me(): Promise<Me> {
    const { data } = await this.http.GET("/v1/me", this.within());
    return asView<Me>(data);
  }

  // --- events, approvals, downloads ----------------------------------------

  /** Events of the log after `after` (auditors and admins). */
  async events(options: { workspace?: string; after?: number; limit?: number } = {}): Promise<Event[]> {
    const { workspace, after = 0, limit = 100 } = options;
    const { data } = await this.http.GET("/v1/events", {
      params: { query: { workspace, after, limit } },
      ...this.within(),
    });
    return asView<{ events: Event[] }>(data).events;
  }

  /** Each event after `after` as it is written, forever; polls every `every` ms when none are new. */
  async *followEvents(options: { workspace?: string; after?: number; every?: number } = {}): AsyncGenerator<Event> {
    let after = options.after ?? 0;
    for (;;) {
      const page = await this.events({ workspace: options.workspace, after, limit: 1000 });
      for (const event of page) {
        after = event.id;
        yield event;
      }
      if (page.length === 0) await new Promise((resolve) => setTimeout(resolve, options.every ?? 500));
    }
  }

  async approvals(options: { state?: Approval["state"] | "all"; workspace?: string } = {}): Promise<Approval[]> {
    const { data } = await this.http.GET("/v1/approvals", {
      params: { query: { state: options.state ?? "pending", workspace: options.workspace } },
      ...this.within(),
    });
    return asView<{ approvals: Approval[] }>(data).approvals;
  }

  /**
   * The approval once decided, or as it stands after `timeout`
   * milliseconds (default 300000): its `state` is approved, denied,
   * expired or still pending.
   */
  async waitForApproval(approvalId: string, options: { timeout?: number } = {}): Promise<Approval> {
    const deadline = Date.now() + (options.timeout ?? 300_000);
    for (;;) {
      // The gateway waits at most 300 s per request; ask again until the deadline.
      const left = Math.max(0, Math.min(deadline - Date.now(), 300_000));
      const { data } = await this.http.GET("/v1/approvals/{id}", {
        params: { path: { id: approvalId }, query: { wait: left / 1000 } },
        ...this.within(left + 30_000),
      });
      const approval = asView<Approval>(data);
      if (approval.state !== "pending" || Date.now() >= deadline) return approval;
    }
  }

  async approve(approvalId: string, reason?: string): Promise<Approval> {
    const { data } = await this.http.POST("/v1/approvals/{id}/approve", {
      params: { path: { id: approvalId } },
      body: reason ? { reason } : {},
      ...this.within(),
    });
    return asView<Approval>(data);
  }

  async deny(approvalId: string, reason?: string): Promise<Approval> {
    const { data } = await this.http.POST("/v1/approvals/{id}/deny", {
      params: { path: { id: approvalId } },
      body: reason ? { reason } : {},
      ...this.within(),
    });
    return asView<Approval>(data);
  }

  /** Downloads the browser fetched, held in quarantine by default. */
  async downloads(options: { state?: "held" | "released" | "rejected"; workspace?: string } = {}): Promise<Download[]> {
    const { data } = await this.http.GET("/v1/downloads", {
      params: { query: { state: options.state ?? "held", workspace: options.workspace } },
      ...this.within(),
    });
    return data?.downloads ?? [];
  }

  async release(downloadId: string, reason?: string): Promise<Download> {
    const { data } = await this.http.POST("/v1/downloads/{id}/release", {
      params: { path: { id: downloadId } },
      body: reason ? { reason } : {},
      ...this.within(),
    });
    return data as Download;
  }

  async reject(downloadId: string, reason?: string): Promise<Download> {
    const { data } = await this.http.POST("/v1/downloads/{id}/reject", {
      params: { path: { id: downloadId } },
      body: reason ? { reason } : {},
      ...this.within(),
    });
    return data as Download;
  }

  /** A released download's bytes. */
  async downloadContent(downloadId: string): Promise<Uint8Array> {
    const { data } = await this.http.GET("/v1/downloads/{id}/content", {
      params: { path: { id: downloadId } },
      parseAs: "arrayBuffer",
      ...this.within(),
    });
    return new Uint8Array(data as ArrayBuffer);
  }
}

/**
 * The one place answers are judged: an answer without the gateway's
 * `x-request-id` is {@link NotCubicle}; any other non-2xx is its typed
 * error (a 202 goes on, to become {@link Held}); a request that got no
 * answer is {@link Unreachable}.
 */
function answers(url: string): Middleware {
  const what = (request: Request) => `${request.method} ${new URL(request.url).pathname}`;
  return {
    async onResponse({ request, response }) {
      if (!response.headers.has("x-request-id")) {
        const text = (await response.text()).slice(0, 200);
        throw new NotCubicle(
          what(request),
          response.status,
          "not_cubicle",
          `what answered at ${url} is not a Cubicle gateway (${JSON.stringify(text)}); is the URL (CUBICLE_URL) the one \`cubicle serve\` printed, with no path after the port?`,
        );
      }
      if (response.ok) return undefined;
      const text = await response.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // not JSON: kept as text, shown in the message
      }
      throw fromAnswer(what(request), response.status, body);
    },
    onError({ request, error }) {
      if (error instanceof CubicleError) return error;
      const cause = error instanceof Error ? describe(error) : String(error);
      if (error instanceof Error && error.name === "TimeoutError") {
        return new Unreachable(
          what(request),
          0,
          "timeout",
          `no answer from the gateway at ${url} in time (${cause}); give new Cubicle(url, token, { timeout }) more milliseconds`,
        );
      }
      return new Unreachable(
        what(request),
        0,
        "unreachable",
        `cannot reach the gateway at ${url} (${cause}); is \`cubicle serve\` running there, and is the URL (CUBICLE_URL) right?`,
      );
    },
  };
}

/** An error and its causes, one line (fetch hides ECONNREFUSED in `cause`). */
function describe(error: Error): string {
  const parts = [error.message];
  let cause: unknown = error.cause;
  while (cause instanceof Error) {
    parts.push(cause.message);
    cause = cause.cause;
  }
  return parts.join(": ");
}
