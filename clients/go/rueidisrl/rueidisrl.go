// Package rueidisrl connects the ratelimit package to rueidis: New(client) is a
// ratelimit.Conn on a rueidis.Client, standalone or Cluster.
//
//	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	rl := ratelimit.New(rueidisrl.New(client))
//
// Each call is built with its keys declared, so a Cluster client routes it to their
// slot; keys of several slots are refused before anything is sent.
package rueidisrl

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

type conn struct{ c rueidis.Client }

// New is a ratelimit.Conn on a rueidis client.
func New(c rueidis.Client) ratelimit.Conn { return conn{c} }

func build(c rueidis.Client, cmd ratelimit.Command) (built rueidis.Completed, err error) {
	// rueidis's builder panics on keys of several slots in a Cluster: an error here.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ratelimit: the keys of %s do not hash to one slot (%v): give them one hash tag", cmd.Name, p)
		}
	}()
	head := append(strings.Fields(cmd.Name), cmd.Head...)
	return c.B().Arbitrary(head...).Keys(cmd.Keys...).Args(cmd.Args...).Build(), nil
}

// Do sends one command, routed by its keys.
func (c conn) Do(ctx context.Context, cmd ratelimit.Command) (any, error) {
	built, err := build(c.c, cmd)
	if err != nil {
		return nil, err
	}
	result := c.c.Do(ctx, built)
	reply, err := result.ToAny()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if _, ok := rueidis.IsRedisErr(err); ok {
		// The reply's own text: rueidis's error has lost its "ERR ", which a message
		// that starts with a word in capitals ("ERR UPTO takes ...") cannot be told
		// from a code ("NOSCRIPT ...") without.
		if message, merr := result.ToMessage(); merr != nil {
			if text, _ := message.ToString(); text != "" {
				return nil, &ratelimit.ReplyError{Message: text, Err: err}
			}
		}
	}
	return reply, Wrap(err)
}

// Wrap makes a reply error of rueidis a *ratelimit.ReplyError (the package tells an
// error reply from a connection error by it); other errors are returned as they are.
func Wrap(err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		return &ratelimit.ReplyError{Message: withCode(re.Error()), Err: err}
	}
	return err
}

// withCode gives back the "ERR " that rueidis takes off the generic error replies, so
// that a reply error reads the same on every client: every error reply starts with a
// code in capitals (ERR, WRONGTYPE, NOSCRIPT...). Where the reply itself is at hand,
// Do reads its text instead: a message in capitals ("UPTO takes ...") reads as a code.
func withCode(message string) string {
	code, _, _ := strings.Cut(message, " ")
	for _, r := range code {
		if (r < 'A' || r > 'Z') && r != '_' && r != '-' {
			return "ERR " + message
		}
	}
	if code == "" {
		return "ERR " + message
	}
	return message
}

// Primaries: the nodes that answer ROLE with "master" (the client itself when it is not
// a Cluster client).
func (c conn) Primaries(ctx context.Context) ([]ratelimit.Conn, error) {
	nodes := c.c.Nodes()
	if len(nodes) <= 1 {
		return []ratelimit.Conn{c}, nil
	}
	var out []ratelimit.Conn
	for _, node := range nodes {
		role, err := node.Do(ctx, node.B().Role().Build()).ToArray()
		if err != nil {
			return nil, Wrap(err)
		}
		if len(role) > 0 {
			if r, _ := role[0].ToString(); r == "master" {
				out = append(out, conn{node})
			}
		}
	}
	return out, nil
}
