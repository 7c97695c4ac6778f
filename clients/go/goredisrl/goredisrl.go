// Package goredisrl connects the ratelimit package to go-redis v9: New(rdb) is a
// ratelimit.Conn on a *redis.Client, *redis.ClusterClient, *redis.Ring or a
// redis.UniversalClient (anything with Process).
//
//	rl := ratelimit.New(goredisrl.New(rdb))
//
// Each call is routed by its keys: the position of its first key is set on the
// command, so a Cluster or a Ring sends it to the keys' node without reading the
// module's commands from COMMAND.
package goredisrl

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Client is what New takes: any go-redis client.
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

type conn struct{ c Client }

// New is a ratelimit.Conn on a go-redis client.
func New(c Client) ratelimit.Conn { return conn{c} }

// Do sends one command, its first key's position set for routing.
func (c conn) Do(ctx context.Context, cmd ratelimit.Command) (any, error) {
	argv := cmd.Argv()
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	rc := redis.NewCmd(ctx, args...)
	if len(cmd.Keys) > 0 {
		rc.SetFirstKeyPos(int8(1 + len(cmd.Head)))
	}
	_ = c.c.Process(ctx, rc)
	reply, err := rc.Result()
	if err == redis.Nil {
		return nil, nil
	}
	return reply, Wrap(err)
}

// Wrap makes a reply error of go-redis a *ratelimit.ReplyError (the package tells an
// error reply from a connection error by it); other errors are returned as they are.
func Wrap(err error) error {
	var re redis.Error
	if err != nil && errors.As(err, &re) && err != redis.Nil {
		return &ratelimit.ReplyError{Message: re.Error(), Err: err}
	}
	return err
}

// Primaries: every primary of a ClusterClient, every shard of a Ring, else the client.
func (c conn) Primaries(ctx context.Context) ([]ratelimit.Conn, error) {
	var mu sync.Mutex
	var out []ratelimit.Conn
	// go-redis calls it on every node at once.
	collect := func(_ context.Context, node *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, conn{node})
		return nil
	}
	var err error
	switch v := c.c.(type) {
	case *redis.ClusterClient:
		err = v.ForEachMaster(ctx, collect)
	case *redis.Ring:
		err = v.ForEachShard(ctx, collect)
	default:
		return []ratelimit.Conn{c}, nil
	}
	return out, err
}
