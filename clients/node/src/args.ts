/**
 * Arguments in the commands' own forms: durations, times, keys, options.
 */

/** A key: a string (sent as UTF-8) or a Buffer (sent as it is). */
export type Key = string | Buffer;

/**
 * A duration as the commands take it: `"1500ms"`, `"90s"`, `"1m"`, `"24h"`, `"7d"`, or a
 * number, which (as a bare integer in the commands) means **seconds**: `90` is 90 s.
 */
export type Duration = string | number;

/** A time for `AT`: Unix milliseconds, or a `Date`. */
export type Instant = number | Date;

/** An argument as sent: strings, Buffers and integers. */
export type Arg = string | Buffer | number;

const UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^([0-9]+)(ms|s|m|h|d)?$/i;

/** A duration as an argument: strings go as they are (the server checks them), numbers
 * are whole seconds. */
export function durationArg(value: Duration): Arg {
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) {
      throw new TypeError(`a duration in seconds must be an integer, not ${value} (write "${value * 1000}ms")`);
    }
    return value;
  }
  if (typeof value === "string") return value;
  throw new TypeError(`a duration is a string such as "1m" or a number of seconds, not ${String(value)}`);
}

/** The duration in milliseconds, or undefined when the server would refuse it (its error
 * says why). */
export function durationMs(value: Duration): number | undefined {
  if (typeof value === "number") return Number.isSafeInteger(value) && value > 0 ? value * 1000 : undefined;
  if (typeof value !== "string") return undefined;
  const m = DURATION.exec(value.trim());
  if (!m) return undefined;
  const n = Number(m[1]) * UNITS_MS[(m[2] ?? "s").toLowerCase()];
  return n > 0 && Number.isSafeInteger(n) ? n : undefined;
}

/** A short label of a window for a policy name: as the caller wrote it. */
export function durationLabel(value: Duration): string {
  return typeof value === "number" ? `${value}s` : String(value);
}

/** `AT`'s argument: Unix milliseconds. */
export function atArg(at: Instant): number {
  if (at instanceof Date) return at.getTime();
  if (typeof at === "number" && Number.isSafeInteger(at)) return at;
  throw new TypeError(`AT takes Unix milliseconds (an integer) or a Date, not ${String(at)}`);
}

/** Options every limiter takes. */
export interface CallOptions {
  /** `COST n`: how much this request takes (default 1; 0 peeks). */
  cost?: number;
  /** `AT unix_ms`: judge the call at this time instead of the server's clock. */
  at?: Instant;
  /** `REFUND`: give back `cost` that allowed requests took (never denied). */
  refund?: boolean;
  /** `FORCE`: record `cost` whether or not it fits (the work is done). */
  force?: boolean;
  /** `UPTO`: take as much of `cost` as fits now (at least 1), and say how much in the
   * result's `granted` (0 when refused). */
  upto?: boolean;
}

/** `COST n` (left out when 1), `AT unix_ms`, then `REFUND`, `FORCE` or `UPTO`. */
export function options(o: CallOptions = {}, flags = true): Arg[] {
  const out: Arg[] = [];
  const cost = o.cost ?? 1;
  if (cost !== 1) out.push("COST", cost);
  if (o.at !== undefined && o.at !== null) out.push("AT", atArg(o.at));
  if (o.refund && o.force) throw new TypeError("REFUND and FORCE cannot be given together");
  if (flags) {
    if (o.refund) out.push("REFUND");
    if (o.force) out.push("FORCE");
    if (o.upto) out.push("UPTO");
  } else if (o.refund || o.force || o.upto) {
    throw new TypeError("this command takes neither REFUND, FORCE nor UPTO");
  }
  return out;
}

/** One key or a list of keys: a string (or Buffer) is always one key, never split. */
export function keyList(keys: Key | readonly Key[]): Key[] {
  if (typeof keys === "string" || Buffer.isBuffer(keys)) return [keys];
  if (Array.isArray(keys)) return [...keys];
  throw new TypeError(`a key is a string or a Buffer, or a list of them, not ${String(keys)}`);
}

export function keyBytes(key: Key): Buffer {
  return Buffer.isBuffer(key) ? key : Buffer.from(key, "utf8");
}

/** The caller's own key object for a key the server names in a reply; the reply's key
 * (as a string when it is valid UTF-8) when none matches. */
export function findKey(reply: unknown, keys: readonly Key[], prefix?: Buffer): Key | undefined {
  if (reply === null || reply === undefined) return undefined;
  const wanted = Buffer.isBuffer(reply) ? reply : Buffer.from(String(reply), "utf8");
  for (const key of keys) {
    const bytes = prefix && prefix.length ? Buffer.concat([prefix, keyBytes(key)]) : keyBytes(key);
    if (bytes.equals(wanted)) return key;
  }
  return asText(reply);
}

export function toInt(value: unknown): number {
  if (typeof value === "number") return value;
  if (typeof value === "bigint") return Number(value);
  if (Buffer.isBuffer(value)) return Number(value.toString("ascii"));
  if (typeof value === "string") return Number(value);
  throw new TypeError(`not an integer in the reply: ${String(value)}`);
}

/** A value as text: a Buffer decoded as UTF-8, anything else as `String` writes it. */
export function asText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
}

/** A reply's value as text; undefined for none (nil). */
export function toText(value: unknown): string | undefined {
  return value === null || value === undefined ? undefined : asText(value);
}
