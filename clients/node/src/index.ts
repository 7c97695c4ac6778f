/**
 * redis-native-ratelimit: typed calls of the native rate limiting commands (RL.FIXED,
 * RL.GCRA, RL.MULTI, RL.SLIDING, RL.LOG, RL.ALL, RL.LEASE, RL.RELEASE, CL.THROTTLE,
 * RL.BULKEXPIRE, RL.SWEEP) on ioredis and node-redis, their HTTP headers, local budgets
 * of a hot key (UPTO), and the Lua twins for servers without the module. Middleware:
 * `redis-native-ratelimit/express`, `redis-native-ratelimit/fastify`; a store for express-rate-limit:
 * `redis-native-ratelimit/express-rate-limit`; a storage for @nestjs/throttler:
 * `redis-native-ratelimit/nestjs`.
 */
export { type Arg, type CallOptions, type Duration, type Instant, type Key, durationMs } from "./args.js";
export { type BudgetTimers, LocalBudget, type LocalBudgetOptions, type LocalBudgetStats } from "./budget.js";
export { type BreakerOptions, type BreakerState, CircuitBreaker } from "./breaker.js";
export { type AllOptions, RateLimiter, type RateLimiterOptions } from "./client.js";
export {
  DEFAULT_TIMEOUT_MS,
  Guard,
  type BreakerSetting,
  type GuardOptions,
  LimiterTimeout,
  LimiterUnavailableError,
  type Outcome,
  isOutage,
} from "./guard.js";
export {
  DEFAULT_STANDARD_HEADERS,
  DRAFTS,
  type Draft,
  type HeaderOptions,
  IETF_DRAFT,
  type StandardHeaders,
  ceilSeconds,
  ratelimitHeaders,
} from "./headers.js";
export { DEFAULT_IPV6_SUBNET, ipKey } from "./ip.js";
export { type Decision, type Identity, LimiterCore, type MiddlewareOptions, type MiddlewareStats, PolicyKeyError } from "./middleware.js";
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
  newLeaseId,
} from "./policies.js";
export type { Quota, RateLimit, Sweep, Throttle } from "./results.js";
export { keySlot } from "./slot.js";
export { type Client, type Logger, ModuleMissingError, type SendCommand, type Transport, isReplyError, isUnknownCommand } from "./transport.js";
export { type LuaSources, TwinRunner, TwinUnavailable, luaSources, readLuaDir } from "./twins.js";
