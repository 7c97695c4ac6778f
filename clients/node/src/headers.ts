/**
 * HTTP headers from a result, in the families express-rate-limit 8 names, as the Python
 * package gives them:
 *
 * - `standardHeaders`: the IETF drafts' fields, one draft or several:
 *   - `"draft-6"`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (the
 *     widely deployed fields) and `RateLimit-Policy: limit;w=window_s`, for the quota
 *     that decided;
 *   - `"draft-7"`: `RateLimit: limit=L, remaining=R, reset=S` and the same
 *     `RateLimit-Policy`;
 *   - `"draft-8"` (the current draft, {@link IETF_DRAFT}, has the same fields):
 *     `RateLimit-Policy` lists every quota the call checked (`"name";q=limit;w=window_s`),
 *     and `RateLimit` the one that decided (`"name";r=remaining;t=reset_s`);
 *
 *   the default, {@link DEFAULT_STANDARD_HEADERS}, is `["draft-6", "draft-8"]` (where
 *   two drafts name the same field, the later one in the list writes it); `false` sends
 *   none;
 * - `legacyHeaders`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`
 *   (seconds until the reset, as `RateLimit-Reset`); off by default;
 * - `Retry-After` when refused.
 *
 * Every time is in whole seconds rounded up: a client that waits is never early.
 */
import type { Quota, RateLimit, Throttle } from "./results.js";

/** The revision of the IETF draft whose `RateLimit-Policy` and `RateLimit` are written. */
export const IETF_DRAFT = "draft-ietf-httpapi-ratelimit-headers-10";

/** The drafts `standardHeaders` takes, as express-rate-limit 8 names them. */
export type Draft = "draft-6" | "draft-7" | "draft-8";
export const DRAFTS: readonly Draft[] = ["draft-6", "draft-7", "draft-8"];

/** One draft, several (the later one writes a field two of them name), `false` for none;
 * `true` is `"draft-6"`, as express-rate-limit reads it. */
export type StandardHeaders = Draft | readonly Draft[] | boolean;

/** What the package sends unless told otherwise: draft-6's three fields and draft-8's
 * two. */
export const DEFAULT_STANDARD_HEADERS: readonly Draft[] = ["draft-6", "draft-8"];

export interface HeaderOptions {
  /** The IETF drafts' fields (default `["draft-6", "draft-8"]`). */
  standardHeaders?: StandardHeaders;
  /** `X-RateLimit-Limit`, `-Remaining`, `-Reset` (default false). */
  legacyHeaders?: boolean;
  /** `Retry-After` when refused (default true). */
  retryAfter?: boolean;
}

/** `standardHeaders` as a list of drafts (empty: none); a TypeError names the values it
 * takes. */
export function standardDrafts(value: StandardHeaders | undefined): Draft[] {
  if (value === undefined) return [...DEFAULT_STANDARD_HEADERS];
  if (value === false) return [];
  if (value === true) return ["draft-6"];
  const drafts = typeof value === "string" ? [value] : [...value];
  for (const d of drafts) {
    if (!DRAFTS.includes(d)) {
      throw new TypeError(`standardHeaders: ${JSON.stringify(d)} is not one of ${DRAFTS.join(", ")} (or false, or a list of them)`);
    }
  }
  return drafts;
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

function windowParam(q: Quota): string {
  return q.windowMs === undefined ? "" : `;w=${Math.ceil(q.windowMs / 1000)}`;
}

function isThrottle(r: RateLimit | Throttle): r is Throttle {
  return (r as Throttle).resetAfterS !== undefined;
}

/** The HTTP headers of a result. */
export function ratelimitHeaders(result: RateLimit | Throttle, opts: HeaderOptions = {}): Record<string, string> {
  return draftHeaders(result, standardDrafts(opts.standardHeaders), opts);
}

/** The HTTP headers of a result, with the drafts `standardDrafts` gave (a middleware's,
 * resolved once when it is made). */
export function draftHeaders(
  result: RateLimit | Throttle,
  drafts: readonly Draft[],
  opts: Omit<HeaderOptions, "standardHeaders"> = {},
): Record<string, string> {
  const { legacyHeaders = false, retryAfter = true } = opts;
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
  if (quotas.length === 0) quotas = [{ name: "default", limit: result.limit, windowMs: undefined }];
  const decided = binding ?? quotas[0];
  const headers: Record<string, string> = {};
  for (const draft of drafts) {
    if (draft === "draft-8") {
      headers["RateLimit-Policy"] = quotas.map((q) => `${sfString(q.name)};q=${q.limit}${windowParam(q)}`).join(", ");
      headers["RateLimit"] = `${sfString(decided.name)};r=${result.remaining};t=${resetS}`;
      continue;
    }
    headers["RateLimit-Policy"] = `${result.limit}${windowParam(decided)}`;
    if (draft === "draft-7") {
      headers["RateLimit"] = `limit=${result.limit}, remaining=${result.remaining}, reset=${resetS}`;
    } else {
      headers["RateLimit-Limit"] = String(result.limit);
      headers["RateLimit-Remaining"] = String(result.remaining);
      headers["RateLimit-Reset"] = String(resetS);
    }
  }
  if (legacyHeaders) {
    headers["X-RateLimit-Limit"] = String(result.limit);
    headers["X-RateLimit-Remaining"] = String(result.remaining);
    headers["X-RateLimit-Reset"] = String(resetS);
  }
  if (retryAfter && !result.allowed) {
    // Refused: at least one second (a refusal always has something to wait for).
    headers["Retry-After"] = String(Math.max(1, retryS));
  }
  return headers;
}
