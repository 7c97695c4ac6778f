/**
 * What the express-rate-limit store and the NestJS storage share: their options, and the
 * policy that counts `limit` hits per window with the command `algorithm` names.
 */
import type { GuardOptions } from "./guard.js";
import { Fixed, Gcra, type Policy, Sliding } from "./policies.js";

/** The command that counts a store's hits. */
export type Algorithm = "fixed" | "sliding" | "gcra";

const ALGORITHMS: readonly Algorithm[] = ["fixed", "sliding", "gcra"];

export interface CounterOptions extends GuardOptions {
  /** The command that counts: `"fixed"` (RL.FIXED, default: a window from the first
   * hit), `"sliding"` (RL.SLIDING, `buckets` buckets) or `"gcra"` (RL.GCRA: `limit` at
   * once, refilled evenly over the window). */
  algorithm?: Algorithm;
  /** RL.SLIDING's buckets per window (default 10). */
  buckets?: number;
  /** false (default): the module's commands; true: the Lua twins; "fallback": the
   * commands, and the twins for any the server does not have. */
  twins?: boolean | "fallback";
  luaDir?: string;
}

/** The `algorithm` option, `"fixed"` when not given; a TypeError names the values it
 * takes. */
export function checkAlgorithm(value: Algorithm | undefined): Algorithm {
  const algorithm = value ?? "fixed";
  if (!ALGORITHMS.includes(algorithm)) {
    throw new TypeError(`algorithm: "fixed", "sliding" or "gcra", not ${JSON.stringify(value)}`);
  }
  return algorithm;
}

/** `limit` hits per `windowMs` (whole ms, rounded up, at least 1) with `algorithm`'s
 * command: RL.FIXED, RL.SLIDING of `buckets` buckets, or RL.GCRA with `limit` at once. */
export function counterPolicy(o: { algorithm: Algorithm; limit: number; windowMs: number; buckets?: number; name?: string }): Policy {
  const { algorithm, limit, buckets, name } = o;
  const window = `${Math.max(1, Math.ceil(o.windowMs))}ms`;
  if (algorithm === "gcra") return new Gcra({ maxBurst: limit - 1, count: limit, period: window, name });
  if (algorithm === "sliding") return new Sliding({ limits: [[window, limit]], buckets, name });
  return new Fixed({ limit, window, name });
}
