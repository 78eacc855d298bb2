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
export declare class CubicleError extends Error {
    readonly what: string;
    readonly status: number;
    readonly code: string;
    readonly apiMessage: string;
    readonly body: unknown;
    constructor(what: string, status: number, code: string, apiMessage: string, body?: unknown, hint?: string);
}
/** A wrong or missing URL or token given to the client itself. */
export declare class ConfigError extends CubicleError {
    constructor(message: string);
}
/** No answer from the gateway (not running there, wrong URL, network, timeout). */
export declare class Unreachable extends CubicleError {
}
/**
 * Something answered, but not a Cubicle gateway (its answer lacks the
 * gateway's `x-request-id`): the URL points elsewhere (another port, a
 * path after the host, a proxy's own error page).
 */
export declare class NotCubicle extends CubicleError {
}
/** 400: an input you chose is wrong; the message names it. */
export declare class BadRequest extends CubicleError {
}
/** 401: no token, or not a valid one. */
export declare class Unauthorized extends CubicleError {
}
/** 403: the token's role may not do this (or an approval was denied). */
export declare class Forbidden extends CubicleError {
}
/** 404: no such thing, or one outside the token's scope. */
export declare class NotFound extends CubicleError {
}
/** 409: not now (paused, an operator holds control, not running). */
export declare class Conflict extends CubicleError {
}
/** 413: a body or file over the limit. */
export declare class TooLarge extends CubicleError {
}
/** 429: too many of this caller's operations wait for a person. */
export declare class TooMany extends CubicleError {
}
/** 502/503/504: the workspace or the gateway could not do it now. */
export declare class Unavailable extends CubicleError {
}
/** The error for a non-2xx answer of the gateway. */
export declare function fromAnswer(what: string, status: number, body: unknown): CubicleError;
export declare function isObject(value: unknown): value is Record<string, unknown>;
