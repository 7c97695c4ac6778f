/**
 * A client's address as a rate limit key, as express-rate-limit 8 makes it: an IPv6
 * address stands for its network (`/56` by default: one customer's allocation, who can
 * otherwise walk through 2^72 addresses, one per request), an IPv4 address (and an IPv4
 * address written as IPv6, `::ffff:1.2.3.4`) for itself.
 */
import { isIPv4, isIPv6 } from "node:net";

/** The IPv6 prefix length the default key groups addresses by. */
export const DEFAULT_IPV6_SUBNET = 56;

/** The eight 16-bit groups of an IPv6 address (valid, as `isIPv6` says). */
function groups(ip: string): number[] {
  let text = ip;
  const tail: number[] = [];
  const lastColon = text.lastIndexOf(":");
  if (isIPv4(text.slice(lastColon + 1))) {
    const [a, b, c, d] = text.slice(lastColon + 1).split(".").map(Number);
    tail.push((a << 8) | b, (c << 8) | d);
    text = text.slice(0, lastColon + 1) + "0:0";
  }
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => Number.parseInt(g, 16)));
  const [head, rest] = text.includes("::") ? text.split("::") : [text, undefined];
  const front = parse(head);
  const back = rest === undefined ? [] : parse(rest);
  const all = rest === undefined ? front : [...front, ...new Array(8 - front.length - back.length).fill(0), ...back];
  if (tail.length) all.splice(6, 2, ...tail);
  return all;
}

/** RFC 5952's text of eight groups: lower case, the longest run of two or more zero
 * groups (the first of equal runs) written `::`. */
function format(g: number[]): string {
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (best < 0) return hex.join(":");
  return `${hex.slice(0, best).join(":")}::${hex.slice(best + bestLen).join(":")}`;
}

/** The `ipv6Subnet` setting: a prefix length from 1 to 128, or false; a TypeError says
 * what it takes. */
export function checkIpv6Subnet(subnet: number | false): number | false {
  if (subnet !== false && !(Number.isInteger(subnet) && subnet >= 1 && subnet <= 128)) {
    throw new TypeError(`ipv6Subnet must be an integer from 1 to 128 (or false), not ${String(subnet)}`);
  }
  return subnet;
}

/**
 * The key of a client address: an IPv6 address as its `/subnet` network
 * (`2001:db8:1:1ff::2` with 56: `2001:db8:1:100::/56`; `false`: the address itself),
 * an IPv4 address (also written as IPv6) as it is, anything else unchanged, and
 * `"unknown"` for no address (a request whose connection is gone).
 */
export function ipKey(ip: string | undefined, subnet: number | false = DEFAULT_IPV6_SUBNET): string {
  return addressKey(ip, subnet, true);
}

/** `ipKey` with a subnet `checkIpv6Subnet` has passed already (the middleware's, when it
 * is made), not checked again for each request. */
export function checkedIpKey(ip: string | undefined, subnet: number | false): string {
  return addressKey(ip, subnet, false);
}

function addressKey(ip: string | undefined, subnet: number | false, check: boolean): string {
  if (!ip) return "unknown";
  const address = ip.split("%", 1)[0]; // a zone (fe80::1%eth0) is not part of the address
  if (!isIPv6(address)) return ip;
  const g = groups(address);
  const mapped = g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff;
  const compatible = g.slice(0, 6).every((x) => x === 0) && isIPv4(address.slice(address.lastIndexOf(":") + 1));
  if (mapped || compatible) return `${g[6] >> 8}.${g[6] & 0xff}.${g[7] >> 8}.${g[7] & 0xff}`;
  if (subnet === false) return format(g);
  if (check) checkIpv6Subnet(subnet);
  const masked = g.map((x, i) => {
    const bits = Math.min(16, Math.max(0, subnet - i * 16));
    return bits === 0 ? 0 : x & ((0xffff << (16 - bits)) & 0xffff);
  });
  return `${format(masked)}/${subnet}`;
}
