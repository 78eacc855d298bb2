import { type Approval, type Event, type Me } from "./views.js";
import type { components } from "./wire.js";
import { Workspace } from "./workspace.js";
export type CreateWorkspace = components["schemas"]["CreateWorkspace"];
export type WorkspaceRecord = components["schemas"]["WorkspaceView"];
export type Download = components["schemas"]["DownloadView"];
export declare const DEFAULT_URL = "http://127.0.0.1:7878";
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
export declare class Cubicle {
    readonly url: string;
    readonly token: string;
    readonly timeout: number;
    constructor(url?: string, token?: string, options?: CubicleOptions);
    /**
     * A new workspace, once its desktop answers. `body` is the create body
     * (`name`, `geometry`, `template`, `egress`, `limits`, `time_limits`, ...).
     */
    create(body?: CreateWorkspace): Promise<Workspace>;
    connect(workspaceId: string): Promise<Workspace>;
    list(): Promise<Workspace[]>;
    /**
     * Creates a workspace, runs `fn` with it and deletes it when `fn` ends,
     * however it ends; `fn`'s result. (`await using ws = await
     * cubicle.create()` does the same where `await using` compiles.)
     */
    withWorkspace<T>(body: CreateWorkspace, fn: (workspace: Workspace) => Promise<T>): Promise<T>;
    me(): Promise<Me>;
    /** Events of the log after `after` (auditors and admins). */
    events(options?: {
        workspace?: string;
        after?: number;
        limit?: number;
    }): Promise<Event[]>;
    /** Each event after `after` as it is written, forever; polls every `every` ms when none are new. */
    followEvents(options?: {
        workspace?: string;
        after?: number;
        every?: number;
    }): AsyncGenerator<Event>;
    approvals(options?: {
        state?: Approval["state"] | "all";
        workspace?: string;
    }): Promise<Approval[]>;
    /**
     * The approval once decided, or as it stands after `timeout`
     * milliseconds (default 300000): its `state` is approved, denied,
     * expired or still pending.
     */
    waitForApproval(approvalId: string, options?: {
        timeout?: number;
    }): Promise<Approval>;
    approve(approvalId: string, reason?: string): Promise<Approval>;
    deny(approvalId: string, reason?: string): Promise<Approval>;
    /** Downloads the browser fetched, held in quarantine by default. */
    downloads(options?: {
        state?: "held" | "released" | "rejected";
        workspace?: string;
    }): Promise<Download[]>;
    release(downloadId: string, reason?: string): Promise<Download>;
    reject(downloadId: string, reason?: string): Promise<Download>;
    /** A released download's bytes. */
    downloadContent(downloadId: string): Promise<Uint8Array>;
}
