package ratelimit

import (
	"context"
	"errors"
	"regexp"
	"strings"
)

// Command is one command as sent: Name, then Head, Keys and Args. Keys are the keys the
// command names, which a Cluster client routes by (all in one slot).
type Command struct {
	Name string
	Head []string // arguments before the keys (numkeys, RL.BULKEXPIRE's seconds, FCALL's function)
	Keys []string
	Args []string // arguments after the keys
}

// Argv is the whole command as one list of words.
func (c Command) Argv() []string {
	out := make([]string, 0, 1+len(c.Head)+len(c.Keys)+len(c.Args))
	out = append(out, c.Name)
	out = append(out, c.Head...)
	out = append(out, c.Keys...)
	return append(out, c.Args...)
}

// Conn is what the package needs from a Redis client. goredisrl.New and rueidisrl.New
// make one from go-redis and rueidis clients; any other client can be wrapped the same
// way.
type Conn interface {
	// Do sends one command, routed by its keys, and returns its reply as plain values:
	// int64, string, nil, []any of these. A reply error is returned as a *ReplyError;
	// any other error means that the server could not be asked or did not answer.
	Do(ctx context.Context, cmd Command) (any, error)
	// Primaries is one Conn per primary of a Cluster (the Conn itself on one server):
	// where FUNCTION LOAD and RL.SWEEP go.
	Primaries(ctx context.Context) ([]Conn, error)
}

// ReplyError is an error reply of the server ("ERR invalid window '0s': ...",
// "NOSCRIPT ...", "LOADING ..."), as opposed to a connection error or a timeout.
type ReplyError struct {
	Message string
	Err     error // the client's own error value
}

func (e *ReplyError) Error() string { return e.Message }
func (e *ReplyError) Unwrap() error { return e.Err }

// Prefix is the reply's first word ("ERR", "NOSCRIPT", "LOADING"...).
func (e *ReplyError) Prefix() string {
	word, _, _ := strings.Cut(e.Message, " ")
	return word
}

// IsReplyError tells whether err is (or wraps) an error reply of the server.
func IsReplyError(err error) bool {
	var re *ReplyError
	return errors.As(err, &re)
}

func replyText(err error) (string, bool) {
	var re *ReplyError
	if errors.As(err, &re) {
		return re.Message, true
	}
	return "", false
}

// ModuleMissingError is returned for a command the server does not have: the module is
// not loaded (or is older than the command).
type ModuleMissingError struct {
	Command string
	Reply   string
}

func (e *ModuleMissingError) Error() string {
	return "ratelimit: the Redis server has no " + e.Command + " (" + e.Reply + "): the redis-ratelimit module is not loaded " +
		"(MODULE LOAD /path/to/libredis_ratelimit.so, or loadmodule in redis.conf), or is older than this command; " +
		"use ratelimit.WithTwins(ratelimit.TwinsFallback) (or TwinsAlways) to run the Lua twins instead"
}

func isUnknownCommand(err error) bool {
	text, ok := replyText(err)
	return ok && strings.Contains(strings.ToLower(text), "unknown command")
}

// ErrUpToUnsupported is wrapped by the error of a call with UpTo that the server
// refused as an unknown option: the module loaded is older than UPTO, or the Lua twin
// that ran is (the error then wraps ErrTwinUnavailable too). The error also wraps the
// server's *ReplyError. Nothing was written.
var ErrUpToUnsupported = errors.New("ratelimit: UPTO is not supported")

var unknownUpTo = regexp.MustCompile(`(?i)\bunknown\b.*\bUPTO\b`)

// refusal is an error of several causes, said in one message.
type refusal struct {
	msg  string
	errs []error
}

func (e *refusal) Error() string   { return e.msg }
func (e *refusal) Unwrap() []error { return e.errs }

// refusedUpTo says a refusal of UPTO as such: which command or twin does not take it,
// and what to do.
func (c *call) refusedUpTo(err error, twin bool) error {
	if !c.upto || !replyMatches(err, unknownUpTo) {
		return err
	}
	text, _ := replyText(err)
	if twin {
		return &refusal{
			msg: "ratelimit: " + c.command + "'s Lua twin (" + c.twin + ") does not take UPTO (" + text + "): the twins in use are " +
				"older than UPTO; call the command on a server with the module, or run twins that take UPTO (ratelimit.WithLua)",
			errs: []error{ErrUpToUnsupported, ErrTwinUnavailable, err},
		}
	}
	return &refusal{
		msg: "ratelimit: the server's " + c.command + " does not take UPTO (" + text + "): the redis-ratelimit module loaded " +
			"is older than UPTO; load a version that takes it",
		errs: []error{ErrUpToUnsupported, err},
	}
}
