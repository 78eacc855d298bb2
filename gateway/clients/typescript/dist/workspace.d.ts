import type { Cubicle, WorkspaceRecord } from "./cubicle.js";
import { type ExecChunk, type ExecResult, type StreamOptions } from "./exec.js";
import { Held } from "./held.js";
import { Screenshot } from "./screenshot.js";
import { type Approval, type Event, type FileEntry } from "./views.js";
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
 * One workspace. `await using ws = await cubicle.create()` (or
 * `cubicle.withWorkspace(...)`) deletes it when the block ends.
 */
export declare class Workspace {
    private readonly cubicle;
    record: WorkspaceRecord;
    readonly id: string;
    constructor(cubicle: Cubicle, record: WorkspaceRecord);
    toString(): string;
    private get path();
    refresh(): Promise<WorkspaceRecord>;
    /** Deletes it (a workspace already gone is no error). */
    delete(): Promise<void>;
    [Symbol.asyncDispose](): Promise<void>;
    pause(): Promise<WorkspaceRecord>;
    resume(): Promise<WorkspaceRecord>;
    stop(): Promise<WorkspaceRecord>;
    start(): Promise<WorkspaceRecord>;
    /** The screen, through the gateway's own RFB session. */
    screenshot(options?: {
        format?: "png" | "jpeg";
        quality?: number;
    }): Promise<Screenshot>;
    /**
     * Runs `actions` in one request, in order; with `screenshot: true` a
     * screenshot is taken last, in the same request. Each action's result
     * (images as {@link Screenshot}), or {@link Held}.
     */
    act(actions: Action[], options?: {
        screenshot?: boolean;
        approval?: string;
    }): Promise<ActionResult[] | Held>;
    /** One action by its name: `await ws.action("left_click", { coordinate: [10, 20] })`. */
    action(name: string, params?: Record<string, unknown>, options?: {
        approval?: string;
    }): Promise<ActionResult | Held>;
    leftClick(x: number, y: number): Promise<unknown>;
    doubleClick(x: number, y: number): Promise<unknown>;
    rightClick(x: number, y: number): Promise<unknown>;
    mouseMove(x: number, y: number): Promise<unknown>;
    type(text: string): Promise<unknown>;
    /** xdotool-style key names: `"ctrl+l"`, `"Return"`. */
    key(keys: string): Promise<unknown>;
    scroll(x: number, y: number, direction?: "up" | "down" | "left" | "right", amount?: number): Promise<unknown>;
    /**
     * Runs a command as the workspace's user (`argv`, or a shell line as a
     * string) and answers when it ends, or {@link Held}.
     */
    exec(argv: string[] | string, options?: ExecOptions): Promise<ExecResult | Held>;
    /**
     * Streams a command's output as it comes, over the gateway's exec
     * WebSocket: yields `{kind: "stdout" | "stderr", text}` and last
     * `{kind: "exit", exitCode, signal, ...}`; or one `{kind: "held", held}`
     * when a policy holds it. `stdin` is sent as it comes (a string, bytes,
     * or an async iterable of either), then closed.
     */
    execStream(argv: string[] | string, options?: StreamOptions): AsyncGenerator<ExecChunk>;
    readFile(path: string): Promise<Uint8Array>;
    /** Creates or replaces a file (up to 16 MiB); `mode` is octal text (`"0644"`). */
    writeFile(path: string, data: Uint8Array | string, options?: {
        mode?: string;
        approval?: string;
    }): Promise<Held | undefined>;
    listFiles(path: string): Promise<FileEntry[]>;
    deleteFile(path: string, options?: {
        recursive?: boolean;
        approval?: string;
    }): Promise<Held | undefined>;
    /**
     * Asks a person to confirm a step before the agent takes it (a model's
     * safety check, say): an approval operators decide like a held
     * operation; nothing runs when it is approved. Waits up to `wait`
     * milliseconds for the decision (default 0); the approval's `state` says
     * pending, approved, denied or expired (`cubicle.waitForApproval` waits
     * on). `expiresIn`: milliseconds a person has (default 600000; whole
     * seconds on the wire).
     */
    ask(question: string, options?: {
        details?: Record<string, unknown>;
        expiresIn?: number;
        wait?: number;
    }): Promise<Approval>;
    /** The CDP endpoint of the workspace's browser (send {@link cdpHeaders} with it). */
    cdpUrl(): string;
    cdpHeaders(): Record<string, string>;
    /**
     * The workspace's browser in Playwright, through the gateway's CDP proxy:
     * `await ws.connectPlaywright(chromium)` with `chromium` from
     * `playwright-core` (or `playwright`); without it, `playwright-core` is
     * looked for from the working directory, then from this package.
     */
    connectPlaywright<Browser = unknown>(chromium?: CdpConnector<Browser>): Promise<Browser>;
    /** The operator page showing this workspace (it logs in with the token once, then keeps a cookie). */
    liveViewUrl(): string;
    events(options?: {
        after?: number;
        limit?: number;
    }): Promise<Event[]>;
}
/** What `connectPlaywright` needs of Playwright's `chromium`. */
export interface CdpConnector<Browser> {
    connectOverCDP(endpointURL: string, options?: {
        headers?: Record<string, string>;
    }): Promise<Browser>;
}
