/**
 * Answers the OpenAPI document describes only in words (it gives them no
 * schema, so src/wire.ts types them `unknown`): written here from the
 * gateway's own structs, named after them. Fields the gateway may add later
 * are kept (`[field: string]: unknown`).
 */
/** Who acted (`runtime/src/events.rs` `Actor`). */
export interface Actor {
    token_id: string;
    name: string;
    role: string;
    [field: string]: unknown;
}
/** An operation held for a person (`gateway/src/approvals.rs` `Approval`). */
export interface Approval {
    id: string;
    workspace: string;
    /** The operation held (`exec`, `file.write`, `action`, `cdp`, ...). */
    operation: string;
    /** The exact parameters, as they will run. */
    params: unknown;
    asked_by: Actor;
    /** Unix milliseconds. */
    asked_at: number;
    expires_at: number;
    /** The rule that held it (`policy#rule`) and its reason. */
    rule: string;
    reason: string;
    state: "pending" | "approved" | "denied" | "expired";
    decided_by?: Actor | null;
    decided_at?: number | null;
    decision_reason?: string | null;
    used: boolean;
    /** Its place in the API: `/v1/approvals/{id}`. */
    url: string;
    [field: string]: unknown;
}
/** One event of the log (`runtime/src/events.rs` `Event`). */
export interface Event {
    id: number;
    /** Unix milliseconds. */
    at: number;
    kind: string;
    workspace_id?: string | null;
    /** Absent when the daemon itself acted. */
    actor?: Actor | null;
    detail: unknown;
    request_id?: string | null;
    /** `started`, `ok`, `denied` or `error:<code>`. */
    outcome?: string | null;
    [field: string]: unknown;
}
/** One directory entry (`desktop-image/src/control.rs` `FileInfo`). */
export interface FileEntry {
    name: string;
    type: "file" | "dir" | "symlink" | "other";
    size: number;
    /** Permission bits, e.g. 0o644. */
    mode: number;
    mtime_ms: number;
    link_target?: string;
    [field: string]: unknown;
}
/** Who a token is (`GET /v1/me`). */
export interface Me {
    id: string;
    name: string;
    role: "admin" | "agent" | "operator" | "auditor";
    scope: unknown;
    /** What this role may do, one line each. */
    permissions: unknown;
    [field: string]: unknown;
}
/** An answer the document gives no schema (openapi-fetch types it `undefined`), read as `T`. */
export declare function asView<T>(data: unknown): T;
