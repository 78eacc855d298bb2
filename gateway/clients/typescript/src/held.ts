import type { Approval } from "./views.js";

/**
 * An operation a policy holds until a person decides: a result, not an
 * error (the gateway answers 202).
 *
 * `approvalId` names it; `url` is its place in the API; an operator decides
 * in the live view or with `cubicle approvals approve`. Wait with
 * {@link Held.waitFor} (or `cubicle.waitForApproval(id)`), then send the
 * same call again with `{ approval: held.approvalId }`.
 */
export class Held {
  constructor(
    readonly approvalId: string,
    /** The approval in the API, absolute (`http://.../v1/approvals/apr-...`). */
    readonly url: string,
    /** Why the rule holds it, in the policy's words. */
    readonly reason: string,
    /** The rule that held it (`policy#rule`). */
    readonly rule: string,
    /** Unix milliseconds after which nobody can approve it. */
    readonly expiresAt: number,
    /** The gateway's sentence: what is held and how to go on. */
    readonly message: string,
    private readonly wait: (approvalId: string, timeout: number) => Promise<Approval>,
  ) {}

  /**
   * The approval once a person decided (`state` approved or denied), it
   * expired, or `timeout` milliseconds passed (`state` still pending).
   */
  waitFor(options: { timeout?: number } = {}): Promise<Approval> {
    return this.wait(this.approvalId, options.timeout ?? 300_000);
  }
}

/** Whether an answer is {@link Held} (the same as `instanceof Held`). */
export function isHeld(value: unknown): value is Held {
  return value instanceof Held;
}
