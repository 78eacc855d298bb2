/**
 * Typed errors carrying the API's code and message (the same classes as
 * the Python client's `cubicle.errors`, plus {@link NotCubicle}).
 */

/**
 * The gateway refused, or could not be asked.
 *
 * `status` is the HTTP status (0 when the gateway was not reached), `code`
 * the API's error code (`not_found`, `control_held`, ...), `apiMessage` its
 * sentence saying what is wrong and what to do. `message` is the whole
 * line: the request, status, code and that sentence, with what to do on
 * this side where the client knows better.
 */
export class CubicleError extends Error {
  constructor(
    readonly what: string,
    readonly status: number,
    readonly code: string,
    readonly apiMessage: string,
    readonly body: unknown = undefined,
    hint = "",
  ) {
    super(`${what}: ${status} ${code}: ${apiMessage}${hint}`);
    this.name = new.target.name;
  }
}

/** A wrong or missing URL or token given to the client itself. */
export class ConfigError extends CubicleError {
  constructor(message: string) {
    super("cubicle client", 0, "config", message);
  }
}

/** No answer from the gateway (not running there, wrong URL, network, timeout). */
export class Unreachable extends CubicleError {}

/**
 * Something answered, but not a Cubicle gateway (its answer lacks the
 * gateway's `x-request-id`): the URL points elsewhere (another port, a
 * path after the host, a proxy's own error page).
 */
export class NotCubicle extends CubicleError {}

/** 400: an input you chose is wrong; the message names it. */
export class BadRequest extends CubicleError {}

/** 401: no token, or not a valid one. */
export class Unauthorized extends CubicleError {}

/** 403: the token's role may not do this (or an approval was denied). */
export class Forbidden extends CubicleError {}

/** 404: no such thing, or one outside the token's scope. */
export class NotFound extends CubicleError {}

/** 409: not now (paused, an operator holds control, not running). */
export class Conflict extends CubicleError {}

/** 413: a body or file over the limit. */
export class TooLarge extends CubicleError {}

/** 429: too many of this caller's operations wait for a person. */
export class TooMany extends CubicleError {}

/** 502/503/504: the workspace or the gateway could not do it now. */
export class Unavailable extends CubicleError {}

type Kind = new (what: string, status: number, code: string, message: string, body: unknown, hint: string) => CubicleError;

const BY_STATUS: Record<number, Kind> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  413: TooLarge,
  429: TooMany,
  502: Unavailable,
  503: Unavailable,
  504: Unavailable,
};

const HINTS: Record<number, string> = {
  401: " (check the token: CUBICLE_TOKEN or the one given to new Cubicle(); `cubicle token create` makes one, `cubicle serve` prints the first)",
};

/** The error for a non-2xx answer of the gateway. */
export function fromAnswer(what: string, status: number, body: unknown): CubicleError {
  const error = isObject(body) && isObject(body.error) ? body.error : {};
  const code = typeof error.code === "string" ? error.code : "";
  let message = typeof error.message === "string" ? error.message : "";
  if (!message) message = (typeof body === "string" ? body : JSON.stringify(body ?? "")).slice(0, 500);
  const Kind = BY_STATUS[status] ?? CubicleError;
  return new Kind(what, status, code, message, body, HINTS[status] ?? "");
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
