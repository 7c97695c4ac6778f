/**
 * A Fastify plugin:
 *
 *     import { fastifyRateLimit } from "redis-ratelimit/fastify";
 *     await app.register(fastifyRateLimit, { client: redis, policy: new Gcra({...}) });
 *     app.get("/search", { config: { rateLimit: new Sliding({...}) } }, handler);  // per route
 *     app.get("/health", { config: { rateLimit: false } }, handler);              // not limited
 *
 * The plugin applies to the whole app (it is not encapsulated). A refused request gets
 * 429 with `Retry-After` and the rate limit headers; an allowed one goes on with the
 * headers set and the result in `request.rateLimit`.
 */
import type { Key } from "./args.js";
import type { CircuitBreaker } from "./breaker.js";
import type { RateLimiter } from "./client.js";
import { type Decision, LimiterCore, type MiddlewareOptions, encodeBody } from "./middleware.js";
import type { Policy } from "./policies.js";
import type { RateLimit } from "./results.js";

export interface FastifyRequestLike {
  method: string;
  url: string;
  ip: string;
  routeOptions?: { config?: { rateLimit?: Policy | null | false } };
  rateLimit?: RateLimit | null;
}

interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  getHeader(name: string): unknown;
  send(body?: unknown): FastifyReplyLike;
  raw: { once(event: string, fn: () => void): unknown };
}

interface FastifyLike {
  decorateRequest(name: string, value: unknown): unknown;
  addHook(name: string, fn: (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<unknown>): unknown;
  decorate?(name: string, value: unknown): unknown;
}

export interface FastifyOptions extends MiddlewareOptions<FastifyRequestLike> {}

/** The state of the plugin, for tests and metrics: `app.rateLimit.breaker.state`... */
export interface FastifyRateLimitState {
  limiter: RateLimiter;
  breaker: CircuitBreaker | undefined;
  core: LimiterCore<FastifyRequestLike>;
}

function reject(reply: FastifyReplyLike, d: Extract<Decision, { kind: "limited" | "unavailable" }>): FastifyReplyLike {
  const [body, type] = encodeBody(d.body);
  reply.code(d.status);
  for (const [k, v] of Object.entries(d.headers)) reply.header(k, v);
  reply.header("Content-Type", type);
  return reply.send(body);
}

/** The plugin: register it with `app.register(fastifyRateLimit, options)`. */
export async function fastifyRateLimit(fastify: FastifyLike, options: FastifyOptions): Promise<void> {
  const core = new LimiterCore<FastifyRequestLike>({ ...options, key: options.key ?? ((req) => req.ip as Key) });
  fastify.decorateRequest("rateLimit", null);
  fastify.decorate?.("rateLimit", { limiter: core.limiter, breaker: core.breaker, core } satisfies FastifyRateLimitState);
  fastify.addHook("onRequest", async (request, reply) => {
    const path = request.url.split("?", 1)[0];
    const decision = await core.decide(request, request.method, path, request.routeOptions?.config?.rateLimit);
    switch (decision.kind) {
      case "pass":
        return;
      case "limited":
        request.rateLimit = decision.result;
        return reject(reply, decision);
      case "unavailable":
        return reject(reply, decision);
      case "allowed": {
        request.rateLimit = decision.result;
        for (const [k, v] of Object.entries(decision.headers)) reply.header(k, v);
        const release = decision.release;
        if (release) reply.raw.once("close", () => void release());
        return;
      }
    }
  });
}

// Not encapsulated: the hook applies to every route of the app that registers it.
const plugin = fastifyRateLimit as unknown as Record<symbol, unknown>;
plugin[Symbol.for("skip-override")] = true;
plugin[Symbol.for("fastify.display-name")] = "redis-ratelimit";

export default fastifyRateLimit;
