/**
 * A Fastify plugin:
 *
 *     import { fastifyRateLimit } from "redis-native-ratelimit/fastify";
 *     await app.register(fastifyRateLimit, { client: redis, policy: new Gcra({...}) });
 *     app.get("/search", { config: { rateLimit: new Sliding({...}) } }, handler);  // per route
 *     app.get("/health", { config: { rateLimit: false } }, handler);              // not limited
 *
 * The plugin applies to the whole app (it is not encapsulated). A refused request gets
 * 429 with `Retry-After` and the rate limit headers; an allowed one goes on with the
 * headers set and the result in `request.rateLimit`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { CircuitBreaker } from "./breaker.js";
import type { RateLimiter } from "./client.js";
import { checkedIpKey } from "./ip.js";
import { type Decision, LimiterCore, type MiddlewareOptions, type MiddlewareStats, encodeBody } from "./middleware.js";
import type { Policy } from "./policies.js";
import type { RateLimit } from "./results.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The limiter's result for this request (null when it was not limited). */
    rateLimit: RateLimit | null;
  }
  interface FastifyContextConfig {
    /** This route's policy; null or false: not limited. */
    rateLimit?: Policy | null | false;
  }
  interface FastifyInstance {
    /** The plugin's state: its limiter, circuit breaker and counts. */
    rateLimit: FastifyRateLimitState;
  }
}

export interface FastifyOptions extends MiddlewareOptions<FastifyRequest> {
  /** Answers a refused request instead of the 429 (the rate limit headers and
   * `Retry-After` are already set, and `request.rateLimit` holds the result); send the
   * reply (`reply.code(...).send(...)`) and return it. */
  handler?: (request: FastifyRequest, reply: FastifyReply, result: RateLimit) => unknown;
}

/** The state of the plugin, for tests and metrics: `app.rateLimit.breaker.state`,
 * `app.rateLimit.stats.shadowDenials`. */
export interface FastifyRateLimitState {
  limiter: RateLimiter;
  breaker: CircuitBreaker | undefined;
  core: LimiterCore<FastifyRequest>;
  stats: MiddlewareStats;
}

function reject(reply: FastifyReply, d: Extract<Decision, { kind: "limited" | "unavailable" }>): FastifyReply {
  const [body, type] = encodeBody(d.body);
  reply.code(d.status);
  for (const [k, v] of Object.entries(d.headers)) reply.header(k, v);
  reply.header("Content-Type", type);
  return reply.send(body);
}

/** The plugin: register it with `app.register(fastifyRateLimit, options)`. */
export async function fastifyRateLimit(fastify: FastifyInstance, options: FastifyOptions): Promise<void> {
  // The default key: the client's address (Fastify's `trustProxy` decides
  // `request.ip`), an IPv6 one as its network.
  const core: LimiterCore<FastifyRequest> = new LimiterCore<FastifyRequest>(options, (request) => checkedIpKey(request.ip, core.ipv6Subnet));
  fastify.decorateRequest("rateLimit", null);
  const state: FastifyRateLimitState = { limiter: core.limiter, breaker: core.breaker, core, stats: core.stats };
  fastify.decorate("rateLimit", state);
  fastify.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split("?", 1)[0];
    const config = request.routeOptions?.config as { rateLimit?: Policy | null | false } | undefined;
    const decision = await core.decide(request, request.method, path, config?.rateLimit);
    switch (decision.kind) {
      case "pass":
        return;
      case "limited":
        request.rateLimit = decision.result;
        if (options.handler) {
          for (const [k, v] of Object.entries(decision.headers)) reply.header(k, v);
          await options.handler(request, reply, decision.result);
          return reply;
        }
        return reject(reply, decision);
      case "unavailable":
        return reject(reply, decision);
      case "allowed": {
        request.rateLimit = decision.result;
        for (const [k, v] of Object.entries(decision.headers)) reply.header(k, v);
        const release = decision.release;
        if (release) reply.raw.once("close", release);
        return;
      }
    }
  });
}

// Not encapsulated: the hook applies to every route of the app that registers it.
const plugin = fastifyRateLimit as unknown as Record<symbol, unknown>;
plugin[Symbol.for("skip-override")] = true;
plugin[Symbol.for("fastify.display-name")] = "redis-native-ratelimit";

export default fastifyRateLimit;
