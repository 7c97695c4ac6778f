package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Twins says when a Limiter runs the commands' Lua twins instead of the commands.
type Twins int

const (
	// TwinsNever calls the module's commands (the default); a server without the
	// module answers with a *ModuleMissingError.
	TwinsNever Twins = iota
	// TwinsFallback calls the commands and, for a command the server does not have,
	// says so once in the log and runs its twin from then on.
	TwinsFallback
	// TwinsAlways runs the twins: for servers where modules cannot be loaded.
	TwinsAlways
)

// LimiterOption configures a Limiter.
type LimiterOption func(*Limiter)

// WithTwins sets when the Lua twins run (default TwinsNever).
func WithTwins(when Twins) LimiterOption { return func(l *Limiter) { l.twinsWhen = when } }

// WithLua runs other twins than the embedded ones (ReadLua reads a directory).
func WithLua(src LuaSources) LimiterOption { return func(l *Limiter) { l.lua = &src } }

// WithLogger sets where the limiter says what it did about the server (the twins in
// use); default slog.Default().
func WithLogger(logger *slog.Logger) LimiterOption { return func(l *Limiter) { l.logger = logger } }

// Limiter makes typed calls of the module's commands over a Conn. It is safe for
// concurrent use.
type Limiter struct {
	conn      Conn
	twinsWhen Twins
	lua       *LuaSources
	logger    *slog.Logger
	twinsOnce sync.Once
	twins     *twins
	missing   sync.Map // command name -> true: the server has no such command
}

// New makes a Limiter on a Conn (goredisrl.New(rdb), rueidisrl.New(client)).
func New(conn Conn, opts ...LimiterOption) *Limiter {
	l := &Limiter{conn: conn, logger: slog.Default()}
	for _, opt := range opts {
		opt(l)
	}
	return l
}

// Conn is the connection the limiter calls through.
func (l *Limiter) Conn() Conn { return l.conn }

func (l *Limiter) twinRunner() *twins {
	l.twinsOnce.Do(func() {
		src := EmbeddedLua()
		if l.lua != nil {
			src = *l.lua
		}
		l.twins = newTwins(src)
	})
	return l.twins
}

// run sends a call as the command, or as its twin.
func (l *Limiter) run(ctx context.Context, c *call) (any, error) {
	useTwin := l.twinsWhen == TwinsAlways
	if l.twinsWhen == TwinsFallback {
		_, useTwin = l.missing.Load(c.command)
	}
	if !useTwin {
		reply, err := l.conn.Do(ctx, c.native())
		if err == nil {
			return c.parse(reply)
		}
		if !isUnknownCommand(err) {
			return nil, c.refusedUpTo(err, false)
		}
		text, _ := replyText(err)
		if l.twinsWhen != TwinsFallback || c.twin == "" {
			return nil, &ModuleMissingError{Command: c.command, Reply: text}
		}
		if _, was := l.missing.LoadOrStore(c.command, true); !was {
			l.logger.Warn("redis-ratelimit: the server has no "+c.command+"; running its Lua twin instead "+
				"(the Functions library 'ratelimit' where FUNCTION is allowed, else a script)", "reply", text)
		}
	}
	if c.twin == "" {
		return nil, errors.Join(ErrTwinUnavailable, errors.New(c.command+" has no Lua twin"))
	}
	reply, err := l.twinRunner().run(ctx, l.conn, c.twin, c.keys, c.twinArgs())
	if err != nil {
		return nil, c.refusedUpTo(err, true)
	}
	return c.parse(reply)
}

// runAs runs a call whose reader gives a T.
func runAs[T any](ctx context.Context, l *Limiter, c *call) (T, error) {
	v, err := l.run(ctx, c)
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

func (l *Limiter) result(ctx context.Context, c *call, err error) (Result, error) {
	if err != nil {
		return Result{}, err
	}
	return runAs[Result](ctx, l, c)
}

// Check applies a policy to its keys (one key, or one per rule for All, any number for
// Multi and Sliding): what the middleware calls. Options: Cost, At, Refund, Force,
// UpTo (not for a Lease), and ID for a lease, Meta for a Log.
func (l *Limiter) Check(ctx context.Context, policy Policy, keys []string, opts ...Option) (Result, error) {
	o, err := collect(opts)
	if err == nil {
		err = o.only(policy.PolicyName(), policy.options()...)
	}
	if err != nil {
		return Result{}, err
	}
	c, err := policy.call(keys, o)
	return l.result(ctx, c, err)
}

// typed runs a typed call: its options are those of the policy's command plus the
// keywords that build the policy (extra).
func (l *Limiter) typed(ctx context.Context, command string, opts []Option, extra []string, build func(o *callOptions) Policy, keys []string) (Result, error) {
	o, err := collect(opts)
	if err != nil {
		return Result{}, err
	}
	p := build(o)
	if err := o.only(command, append(append([]string{"NAME"}, extra...), p.options()...)...); err != nil {
		return Result{}, err
	}
	c, err := p.call(keys, o)
	return l.result(ctx, c, err)
}

// Fixed is RL.FIXED key limit window [COST n] [ALIGN] [AT ms] [REFUND|FORCE|UPTO].
// Options: Cost, At, Align, Refund, Force, UpTo, Name.
func (l *Limiter) Fixed(ctx context.Context, key string, limit int64, window time.Duration, opts ...Option) (Result, error) {
	return l.typed(ctx, "RL.FIXED", opts, []string{"ALIGN"}, func(o *callOptions) Policy {
		return Fixed{Limit: limit, Window: window, Align: o.align, Name: o.name}
	}, []string{key})
}

// GCRA is RL.GCRA key max_burst count period [COST n] [AT ms] [DELAY d]
// [REFUND|FORCE|UPTO]. Options: Cost, At, Delay, Refund, Force, UpTo, Name (the flags
// not with Delay).
func (l *Limiter) GCRA(ctx context.Context, key string, maxBurst, count int64, period time.Duration, opts ...Option) (Result, error) {
	return l.typed(ctx, "RL.GCRA", opts, []string{"DELAY"}, func(o *callOptions) Policy {
		return GCRA{MaxBurst: maxBurst, Count: count, Period: period, Delay: o.delay, Name: o.name}
	}, []string{key})
}

// Multi is RL.MULTI numkeys key... LIMIT window limit... [COST n] [ALIGN] [AT ms]
// [REFUND|FORCE|UPTO]. Options: Cost, At, Align, Refund, Force, UpTo, Names, Name.
func (l *Limiter) Multi(ctx context.Context, keys []string, limits []Window, opts ...Option) (Result, error) {
	return l.typed(ctx, "RL.MULTI", opts, []string{"ALIGN", "NAMES"}, func(o *callOptions) Policy {
		return Multi{Limits: limits, Align: o.align, Names: o.names, Name: o.name}
	}, keys)
}

// Sliding is RL.SLIDING numkeys key... LIMIT window limit... [BUCKETS n] [COST n]
// [AT ms] [REFUND|FORCE|UPTO]. Options: Cost, At, Buckets, Refund, Force, UpTo, Names,
// Name.
func (l *Limiter) Sliding(ctx context.Context, keys []string, limits []Window, opts ...Option) (Result, error) {
	return l.typed(ctx, "RL.SLIDING", opts, []string{"BUCKETS", "NAMES"}, func(o *callOptions) Policy {
		return Sliding{Limits: limits, Buckets: o.buckets, Names: o.names, Name: o.name}
	}, keys)
}

// Log is RL.LOG key limit window [META value] [COST n] [AT ms] [REFUND|FORCE|UPTO].
// Options: Cost, At, Meta, Refund, Force, UpTo, Name.
func (l *Limiter) Log(ctx context.Context, key string, limit int64, window time.Duration, opts ...Option) (Result, error) {
	return l.typed(ctx, "RL.LOG", opts, nil, func(o *callOptions) Policy {
		return Log{Limit: limit, Window: window, Name: o.name}
	}, []string{key})
}

// Rule is one key of an RL.ALL call and the policy it is judged by.
type Rule struct {
	Key    string
	Policy Policy
}

// All is RL.ALL numkeys key... rule... [COST n] [AT ms] [ID id] [REFUND|FORCE|UPTO]: one
// rule per key (Fixed, GCRA, Multi, Sliding, Log, Lease, Ban), all or nothing.
// Options: Cost, At, ID, Refund, Force, UpTo, Name.
func (l *Limiter) All(ctx context.Context, rules []Rule, opts ...Option) (Result, error) {
	keys := make([]string, len(rules))
	policies := make([]Policy, len(rules))
	for i, r := range rules {
		keys[i], policies[i] = r.Key, r.Policy
	}
	return l.typed(ctx, "RL.ALL", opts, nil, func(o *callOptions) Policy {
		return All{Rules: policies, Name: o.name}
	}, keys)
}

// Lease is RL.LEASE key limit ttl [ID id] [COST 0|1] [AT ms]: one of limit slots; the
// result's LeaseID names it ("" when refused). Options: ID, Cost, At, Name.
func (l *Limiter) Lease(ctx context.Context, key string, limit int64, ttl time.Duration, opts ...Option) (Result, error) {
	return l.typed(ctx, "RL.LEASE", opts, nil, func(o *callOptions) Policy {
		return Lease{Limit: limit, TTL: ttl, Name: o.name}
	}, []string{key})
}

// Release is RL.RELEASE key id [AT ms]: true if a live lease was released.
// Options: At.
func (l *Limiter) Release(ctx context.Context, key, id string, opts ...Option) (bool, error) {
	o, err := collect(opts)
	if err == nil {
		err = o.only("RL.RELEASE", "AT")
	}
	if err != nil {
		return false, err
	}
	tail, _ := o.tail("RL.RELEASE", false)
	return runAs[bool](ctx, l, &call{
		command: "RL.RELEASE", keys: []string{key}, args: append([]string{id}, tail...), twin: "rl_release",
		parse: func(reply any) (any, error) {
			n, err := toInt(reply)
			return n == 1, err
		},
	})
}

// Throttle is CL.THROTTLE key max_burst count period [quantity], redis-cell's command:
// period in whole seconds, and the reply's times in whole seconds, rounded up.
func (l *Limiter) Throttle(ctx context.Context, key string, maxBurst, count, periodSeconds, quantity int64) (Throttle, error) {
	return runAs[Throttle](ctx, l, &call{
		command: "CL.THROTTLE", keys: []string{key}, twin: "cl_throttle",
		args: []string{itoa(maxBurst), itoa(count), itoa(periodSeconds), itoa(quantity)},
		parse: func(reply any) (any, error) {
			n, _, err := fiveInts(reply)
			if err != nil {
				return nil, err
			}
			return Throttle{Allowed: n[0] == 0, Limit: n[1], Remaining: n[2],
				RetryAfter: time.Duration(n[3]) * time.Second, ResetAfter: time.Duration(n[4]) * time.Second}, nil
		},
	})
}

// BulkExpire is RL.BULKEXPIRE seconds key...: the keys that got a TTL (those that
// existed without one), in the order given.
func (l *Limiter) BulkExpire(ctx context.Context, ttl time.Duration, keys ...string) ([]string, error) {
	d, err := durationArg("seconds", ttl)
	if err != nil {
		return nil, err
	}
	return runAs[[]string](ctx, l, &call{
		command: "RL.BULKEXPIRE", pre: []string{d}, keys: keys, twin: "rl_bulkexpire",
		parse: func(reply any) (any, error) {
			a, err := toArray(reply, 0)
			if err != nil {
				return nil, err
			}
			out := make([]string, 0, len(a))
			for _, k := range a {
				s, ok := toText(k)
				if !ok {
					return nil, replyError("RL.BULKEXPIRE: %v is not a key", k)
				}
				out = append(out, s)
			}
			return out, nil
		},
	})
}

// SweepOptions are RL.SWEEP's options: MATCH, COUNT (0: the command's default), TYPE
// and DRYRUN.
type SweepOptions struct {
	Match  string
	Count  int64
	Type   string
	DryRun bool
}

// Sweep is RL.SWEEP cursor seconds [MATCH p] [COUNT n] [TYPE t] [DRYRUN] on one server:
// a chunk of a SCAN that gives a TTL to the keys without one. It is node-local: in a
// Cluster, sweep each primary (Primaries). Start with cursor "0"; the sweep is done
// when the reply's cursor is "0" again.
func (l *Limiter) Sweep(ctx context.Context, cursor string, ttl time.Duration, o SweepOptions) (Sweep, error) {
	d, err := durationArg("seconds", ttl)
	if err != nil {
		return Sweep{}, err
	}
	nodes, err := l.conn.Primaries(ctx)
	if err != nil {
		return Sweep{}, err
	}
	if len(nodes) != 1 {
		return Sweep{}, invalid("RL.SWEEP is node-local: call it on each primary (Limiter.Primaries)")
	}
	args := []string{cursor, d}
	if o.Match != "" {
		args = append(args, "MATCH", o.Match)
	}
	if o.Count != 0 {
		args = append(args, "COUNT", itoa(o.Count))
	}
	if o.Type != "" {
		args = append(args, "TYPE", o.Type)
	}
	if o.DryRun {
		args = append(args, "DRYRUN")
	}
	return runAs[Sweep](ctx, l.on(nodes[0]), &call{
		command: "RL.SWEEP", args: args,
		parse: func(reply any) (any, error) {
			a, err := toArray(reply, 3)
			if err != nil {
				return nil, err
			}
			cursor, ok := toText(a[0])
			if !ok {
				n, err := toInt(a[0])
				if err != nil {
					return nil, err
				}
				cursor = itoa(n)
			}
			scanned, err := toInt(a[1])
			if err != nil {
				return nil, err
			}
			expired, err := toInt(a[2])
			return Sweep{Cursor: cursor, Scanned: scanned, Expired: expired}, err
		},
	})
}

// Primaries is one Limiter per primary (this one's settings; one Limiter outside a
// Cluster): where RL.SWEEP runs.
func (l *Limiter) Primaries(ctx context.Context) ([]*Limiter, error) {
	nodes, err := l.conn.Primaries(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Limiter, len(nodes))
	for i, n := range nodes {
		out[i] = l.on(n)
	}
	return out, nil
}

// on is a Limiter with this one's settings on another connection (one primary).
func (l *Limiter) on(c Conn) *Limiter {
	return &Limiter{conn: c, twinsWhen: l.twinsWhen, lua: l.lua, logger: l.logger}
}

// HasCommand tells whether the server has a command (COMMAND INFO).
func (l *Limiter) HasCommand(ctx context.Context, name string) (bool, error) {
	reply, err := l.conn.Do(ctx, Command{Name: "COMMAND", Head: []string{"INFO", name}})
	if err != nil {
		return false, err
	}
	a, _ := reply.([]any)
	for _, x := range a {
		if x != nil {
			return true, nil
		}
	}
	return false, nil
}
