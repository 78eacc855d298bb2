/**
 * Cubicle's TypeScript client: isolated desktops for computer-use agents.
 *
 *     import { Cubicle } from "cubicle-client";
 *
 *     const cubicle = new Cubicle("http://127.0.0.1:7878", token);
 *     await cubicle.withWorkspace({ name: "demo" }, async (ws) => {   // deleted after
 *       await ws.act([{ action: "left_click", coordinate: [640, 400] },
 *                     { action: "type", text: "hello" }], { screenshot: true });
 *       console.log(await ws.exec(["uname", "-a"]));
 *     });
 *
 * The same surface as the Python client (`gateway/clients/python`), in
 * camelCase, async throughout. Timeouts are in milliseconds. Refusals
 * throw typed errors (`errors.ts`) carrying the API's code and message; an
 * operation a policy holds answers {@link Held}.
 */
export { Cubicle, DEFAULT_URL } from "./cubicle.js";
export type { CreateWorkspace, CubicleOptions, Download, WorkspaceRecord } from "./cubicle.js";
export { Workspace } from "./workspace.js";
export type { Action, ActionResult, CdpConnector, ExecOptions } from "./workspace.js";
export type { ExecChunk, ExecResult, StreamOptions } from "./exec.js";
export { Held, isHeld } from "./held.js";
export { Screenshot, imageSize } from "./screenshot.js";
export type { Actor, Approval, Event, FileEntry, Me } from "./views.js";
export * as errors from "./errors.js";
export {
  BadRequest,
  Conflict,
  ConfigError,
  CubicleError,
  Forbidden,
  NotCubicle,
  NotFound,
  TooLarge,
  TooMany,
  Unauthorized,
  Unavailable,
  Unreachable,
} from "./errors.js";
export type { components, paths } from "./wire.js";
