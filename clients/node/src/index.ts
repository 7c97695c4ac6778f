/**
 * redis-ratelimit: typed calls of the native rate limiting commands (RL.FIXED, RL.GCRA,
 * RL.MULTI, RL.SLIDING, RL.LOG, RL.ALL, RL.LEASE, RL.RELEASE, CL.THROTTLE, RL.BULKEXPIRE,
 * RL.SWEEP) on ioredis and node-redis, their HTTP headers, and the Lua twins for servers
 * without the module. Middleware: `redis-ratelimit/express`, `redis-ratelimit/fastify`;
 * a store for express-rate-limit: `redis-ratelimit/express-rate-limit`.
 */
export { type Arg, type CallOptions, type Duration, type Instant, type Key, durationMs } from "./args.js";
export { type BreakerOptions, type BreakerState, CircuitBreaker } from "./breaker.js";
export { type Logger, ModuleMissingError, RateLimiter, type RateLimiterOptions, isUnknownCommand } from "./client.js";
export { type HeaderOptions, IETF_DRAFT, ceilSeconds, ratelimitHeaders } from "./headers.js";
export { DEFAULT_TIMEOUT_MS, type Decision, LimiterCore, LimiterTimeout, type MiddlewareOptions, isOutage } from "./middleware.js";
export {
  All,
  Ban,
  type BanOptions,
  type Call,
  Fixed,
  type FixedOptions,
  Gcra,
  type GcraOptions,
  Lease,
  type LeaseOptions,
  Log,
  type LogOptions,
  Multi,
  Policy,
  Sliding,
  type WindowLimit,
  type WindowsOptions,
} from "./policies.js";
export type { Quota, RateLimit, Sweep, Throttle } from "./results.js";
export { type Client, type SendCommand, type Transport, isReplyError } from "./transport.js";
export { type LuaSources, TwinRunner, TwinUnavailable, luaSources, readLuaDir } from "./twins.js";
