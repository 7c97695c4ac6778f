package ratelimit

import (
	"errors"
	"strings"
	"testing"
)

// A module older than UPTO refuses it as an unknown option, as the twins without it
// do; the package says which one does not take it. (The twins' refusal is tested on
// real servers; an older module cannot be loaded next to this one.)
func TestARefusalOfUpToIsSaidAsSuch(t *testing.T) {
	reply := &ReplyError{Message: "ERR unknown option 'UPTO' (options here: COST, AT, ALIGN, REFUND, FORCE)"}
	c := &call{command: "RL.FIXED", twin: "rl_fixed", upto: true}

	native := c.refusedUpTo(reply, false)
	var re *ReplyError
	if !errors.Is(native, ErrUpToUnsupported) || errors.Is(native, ErrTwinUnavailable) || !errors.As(native, &re) ||
		!strings.Contains(native.Error(), "the server's RL.FIXED does not take UPTO") || !strings.Contains(native.Error(), "older than UPTO") {
		t.Errorf("the module's refusal: %v", native)
	}
	twin := c.refusedUpTo(reply, true)
	if !errors.Is(twin, ErrUpToUnsupported) || !errors.Is(twin, ErrTwinUnavailable) || !errors.As(twin, &re) ||
		!strings.Contains(twin.Error(), "RL.FIXED's Lua twin (rl_fixed) does not take UPTO") {
		t.Errorf("the twin's refusal: %v", twin)
	}

	// Other errors, and the same text for a call without UPTO, are left as they are.
	other := &ReplyError{Message: "ERR UPTO takes COST n with n at least 1 (COST 0 alone peeks)"}
	if err := c.refusedUpTo(other, false); err != error(other) {
		t.Errorf("another error was rewritten: %v", err)
	}
	plain := &call{command: "RL.FIXED", twin: "rl_fixed"}
	if err := plain.refusedUpTo(reply, true); err != error(reply) {
		t.Errorf("a call without UPTO: %v", err)
	}
}
