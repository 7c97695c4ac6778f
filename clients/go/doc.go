// Package ratelimit calls the redis-ratelimit module's commands from Go: a typed call
// for every command (RL.FIXED, RL.GCRA with DELAY, RL.MULTI, RL.SLIDING, RL.LOG and
// RL.ALL, each with COST and REFUND, FORCE or UPTO; RL.LEASE and RL.RELEASE,
// CL.THROTTLE, RL.BULKEXPIRE, RL.SWEEP), results as
// structs with time.Durations, the HTTP headers of a result, and the Lua twins of the
// commands (embedded, the Functions library first and scripts where FUNCTION is
// refused) for servers without the module.
//
// The package depends on no Redis client. It talks to the server through a Conn, which
// the sub-packages make from the clients people use:
//
//	goredisrl.New(rdb)    // go-redis v9: *redis.Client, *redis.ClusterClient, *redis.Ring, redis.UniversalClient
//	rueidisrl.New(client) // rueidis: rueidis.Client, standalone or Cluster
//
// so a program that uses go-redis compiles no rueidis code, and the other way round.
//
//	rl := ratelimit.New(goredisrl.New(rdb))
//	res, err := rl.GCRA(ctx, "user:42", 2, 1, 2*time.Second) // RL.GCRA user:42 2 1 2s
//	if err == nil && !res.Allowed {
//		// refused: retry after res.RetryAfter
//	}
//
// Sub-packages: redis_rate is a drop-in for github.com/go-redis/redis_rate/v10 backed
// by RL.GCRA; rlhttp is net/http middleware (func(http.Handler) http.Handler).
package ratelimit
