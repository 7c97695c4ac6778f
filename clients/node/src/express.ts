/**
 * Express middleware:
 *
 *     import { rateLimit } from "redis-native-ratelimit/express";
 *     app.use(rateLimit({ client: redis, policy: new Gcra({ maxBurst: 19, count: 10, period: "1s" }) }));
 *
 * A refused request gets 429 with `Retry-After` and the rate limit headers; an allowed
 * one goes on with the headers set and the result in `res.locals.rateLimit`.
 */
import type { NextFunction, Request, RequestHandler, Response } from "express";
import type { CircuitBreaker } from "./breaker.js";
import type { RateLimiter } from "./client.js";
import { checkedIpKey } from "./ip.js";
import { type Decision, LimiterCore, type MiddlewareOptions, type MiddlewareStats, encodeBody } from "./middleware.js";
import type { Policy } from "./policies.js";
import type { RateLimit } from "./results.js";

export interface ExpressOptions extends MiddlewareOptions<Request> {
  /** Answers a refused request instead of the 429 (the rate limit headers and
   * `Retry-After` are already set, and `res.locals.rateLimit` holds the result). */
  handler?: (req: Request, res: Response, next: NextFunction, result: RateLimit) => unknown;
}

export type ExpressMiddleware = RequestHandler & {
  limiter: RateLimiter;
  breaker: CircuitBreaker | undefined;
  core: LimiterCore<Request>;
  /** Counts of allowed and refused requests, and of refusals shadow mode let through. */
  stats: MiddlewareStats;
};

function send(res: Response, decision: Extract<Decision, { kind: "limited" | "unavailable" }>): void {
  const [body, type] = encodeBody(decision.body);
  res.statusCode = decision.status;
  for (const [k, v] of Object.entries(decision.headers)) res.setHeader(k, v);
  res.setHeader("Content-Type", type);
  res.setHeader("Content-Length", String(body.length));
  res.end(body);
}

function setHeaders(res: Response, headers: Record<string, string>): void {
  if (res.headersSent) return;
  for (const [k, v] of Object.entries(headers)) {
    if (res.getHeader(k) === undefined) res.setHeader(k, v);
  }
}

/** Express middleware; `policy` (or `routes`) says what limits a request. Use it on the
 * app (`app.use(...)`) or on one route (`app.post("/login", rateLimit({...}), handler)`). */
export function rateLimit(options: ExpressOptions): ExpressMiddleware {
  // The default key: the client's address (`req.ip` honours Express's "trust proxy"),
  // an IPv6 one as its network.
  const core: LimiterCore<Request> = new LimiterCore<Request>(options, (req) => checkedIpKey(req.ip ?? req.socket?.remoteAddress, core.ipv6Subnet));
  const middleware = async (req: Request, res: Response, next: NextFunction) => {
    let decision: Decision;
    try {
      decision = await core.decide(req, req.method, (req.baseUrl ?? "") + req.path);
    } catch (err) {
      next(err);
      return;
    }
    switch (decision.kind) {
      case "pass":
        next();
        return;
      case "unavailable":
        send(res, decision);
        return;
      case "limited":
        res.locals.rateLimit = decision.result;
        if (options.handler) {
          setHeaders(res, decision.headers);
          try {
            await options.handler(req, res, next, decision.result);
          } catch (err) {
            next(err);
          }
          return;
        }
        send(res, decision);
        return;
      case "allowed": {
        res.locals.rateLimit = decision.result;
        setHeaders(res, decision.headers);
        const release = decision.release;
        if (release) {
          res.once("finish", release);
          res.once("close", release);
        }
        next();
      }
    }
  };
  return Object.assign(middleware, { limiter: core.limiter, breaker: core.breaker, core, stats: core.stats });
}

export type { Policy };
