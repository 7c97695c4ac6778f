/**
 * HTTP headers from a result, as the Python package gives them:
 *
 * - `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (the IETF drafts up to -06;
 *   `X-RateLimit-*` with `xPrefix`), for the quota that decided;
 * - the current IETF draft: `RateLimit-Policy` lists every quota the call checked
 *   (`"name";q=limit;w=window_seconds`) and `RateLimit` the one that decided
 *   (`"name";r=remaining;t=reset_seconds`);
 * - `Retry-After` when refused.
 *
 * Every time is in whole seconds rounded up: a client that waits is never early.
 */
import type { Quota, RateLimit, Throttle } from "./results.js";

/** The revision of the IETF draft whose `RateLimit-Policy` and `RateLimit` are written. */
export const IETF_DRAFT = "draft-ietf-httpapi-ratelimit-headers-10";

export interface HeaderOptions {
  /** `RateLimit-Limit`, `-Remaining`, `-Reset` (default true). */
  legacy?: boolean;
  /** `RateLimit-Policy` and `RateLimit` (default true). */
  draft?: boolean;
  /** `X-RateLimit-*` instead of `RateLimit-*` for the legacy three (default false). */
  xPrefix?: boolean;
  /** `Retry-After` when refused (default true). */
  retryAfter?: boolean;
}

/** Milliseconds to whole seconds, rounded up. */
export function ceilSeconds(ms: number): number {
  return Math.max(0, Math.ceil(ms / 1000));
}

/** A Structured Fields String: quoted, `\` and `"` escaped, printable ASCII only. */
export function sfString(text: string): string {
  let out = "";
  for (const ch of String(text)) {
    if (ch === "\\" || ch === '"') out += "\\" + ch;
    else if (ch >= " " && ch <= "~") out += ch;
    else out += "?";
  }
  return `"${out}"`;
}

function policyItem(q: Quota): string {
  let item = `${sfString(q.name)};q=${q.limit}`;
  if (q.windowMs !== undefined) item += `;w=${Math.ceil(q.windowMs / 1000)}`;
  return item;
}

function isThrottle(r: RateLimit | Throttle): r is Throttle {
  return (r as Throttle).resetAfterS !== undefined;
}

/** The HTTP headers of a result. */
export function ratelimitHeaders(result: RateLimit | Throttle, opts: HeaderOptions = {}): Record<string, string> {
  const { legacy = true, draft = true, xPrefix = false, retryAfter = true } = opts;
  let resetS: number;
  let retryS: number;
  let quotas: Quota[] = [];
  let binding: Quota | undefined;
  if (isThrottle(result)) {
    resetS = result.resetAfterS;
    retryS = result.retryAfterS;
  } else {
    resetS = ceilSeconds(result.resetAfterMs);
    retryS = result.retryAfterMs >= 0 ? ceilSeconds(result.retryAfterMs) : -1;
    quotas = result.quotas ?? [];
    binding = result.quota;
  }
  const headers: Record<string, string> = {};
  if (legacy) {
    const prefix = xPrefix ? "X-RateLimit-" : "RateLimit-";
    headers[prefix + "Limit"] = String(result.limit);
    headers[prefix + "Remaining"] = String(result.remaining);
    headers[prefix + "Reset"] = String(resetS);
  }
  if (draft) {
    if (quotas.length === 0) {
      quotas = [{ name: "default", limit: result.limit, windowMs: undefined }];
      binding = quotas[0];
    }
    const name = (binding ?? quotas[0]).name;
    headers["RateLimit-Policy"] = quotas.map(policyItem).join(", ");
    headers["RateLimit"] = `${sfString(name)};r=${result.remaining};t=${resetS}`;
  }
  if (retryAfter && !result.allowed) {
    headers["Retry-After"] = String(Math.max(1, retryS));
  }
  return headers;
}
