/**
 * Express middleware:
 *
 *     import { rateLimit } from "redis-ratelimit/express";
 *     app.use(rateLimit({ client: redis, policy: new Gcra({ maxBurst: 19, count: 10, period: "1s" }) }));
 *
 * A refused request gets 429 with `Retry-After` and the rate limit headers; an allowed
 * one goes on with the headers set and the result in `res.locals.rateLimit`.
 */
import type { Key } from "./args.js";
import type { CircuitBreaker } from "./breaker.js";
import type { RateLimiter } from "./client.js";
import { type Decision, LimiterCore, type MiddlewareOptions, encodeBody } from "./middleware.js";
import type { Policy } from "./policies.js";

// The few parts of Express's request and response the middleware uses.
export interface ExpressRequest {
  method: string;
  path: string;
  baseUrl?: string;
  ip?: string;
  socket?: { remoteAddress?: string };
}
export interface ExpressResponse {
  setHeader(name: string, value: string): unknown;
  getHeader(name: string): unknown;
  headersSent: boolean;
  statusCode: number;
  end(body?: Buffer): unknown;
  once(event: string, fn: () => void): unknown;
  locals: Record<string, unknown>;
}
export type NextFunction = (err?: unknown) => void;

export type ExpressMiddleware = ((req: ExpressRequest, res: ExpressResponse, next: NextFunction) => Promise<void>) & {
  limiter: RateLimiter;
  breaker: CircuitBreaker | undefined;
  core: LimiterCore<ExpressRequest>;
};

export interface ExpressOptions<Req extends ExpressRequest = ExpressRequest> extends MiddlewareOptions<Req> {}

/** The client's address: `req.ip` (which honours Express's `trust proxy`). */
export function clientAddress(req: ExpressRequest): Key {
  return req.ip ?? req.socket?.remoteAddress ?? "unknown";
}

function send(res: ExpressResponse, decision: Extract<Decision, { kind: "limited" | "unavailable" }>): void {
  const [body, type] = encodeBody(decision.body);
  res.statusCode = decision.status;
  for (const [k, v] of Object.entries(decision.headers)) res.setHeader(k, v);
  res.setHeader("Content-Type", type);
  res.setHeader("Content-Length", String(body.length));
  res.end(body);
}

/** Express middleware; `policy` (or `routes`) says what limits a request. Use it on the
 * app (`app.use(...)`) or on one route (`app.post("/login", rateLimit({...}), handler)`). */
export function rateLimit<Req extends ExpressRequest = ExpressRequest>(options: ExpressOptions<Req>): ExpressMiddleware {
  const core = new LimiterCore<Req>({ ...options, key: options.key ?? (clientAddress as (req: Req) => Key) });
  const middleware = async (req: ExpressRequest, res: ExpressResponse, next: NextFunction) => {
    let decision: Decision;
    try {
      const path = (req.baseUrl ?? "") + req.path;
      decision = await core.decide(req as Req, req.method, path);
    } catch (err) {
      next(err);
      return;
    }
    switch (decision.kind) {
      case "pass":
        next();
        return;
      case "limited":
      case "unavailable":
        res.locals.rateLimit = decision.kind === "limited" ? decision.result : undefined;
        send(res, decision);
        return;
      case "allowed": {
        res.locals.rateLimit = decision.result;
        if (!res.headersSent) {
          for (const [k, v] of Object.entries(decision.headers)) {
            if (res.getHeader(k) === undefined) res.setHeader(k, v);
          }
        }
        const release = decision.release;
        if (release) {
          const end = () => void release();
          res.once("finish", end);
          res.once("close", end);
        }
        next();
      }
    }
  };
  return Object.assign(middleware, {
    limiter: core.limiter,
    breaker: core.breaker,
    core: core as unknown as LimiterCore<ExpressRequest>,
  });
}

export type { Policy };
