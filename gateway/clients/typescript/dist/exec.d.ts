import type { Cubicle } from "./cubicle.js";
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
export declare function execResult(raw: components["schemas"]["ExecResult"]): ExecResult;
export type ExecChunk = {
    kind: "stdout" | "stderr";
    text: string; /** The exact bytes, when they are not UTF-8. */
    bytes?: Uint8Array;
} | {
    kind: "exit";
    exitCode: number | null;
    signal: number | null;
    timedOut: boolean;
    durationMs: number;
} | {
    kind: "held";
    held: Held;
};
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
export declare function execStream(cubicle: Cubicle, workspaceId: string, argv: string[] | string, options: StreamOptions): AsyncGenerator<ExecChunk>;
