package ratelimit

import (
	"strconv"
	"strings"
	"time"
)

// IETFDraft is the revision of the IETF draft whose RateLimit-Policy and RateLimit
// fields Headers writes.
const IETFDraft = "draft-ietf-httpapi-ratelimit-headers-10"

// HeaderOptions choose the headers of a result. The zero value writes them all.
type HeaderOptions struct {
	NoLegacy     bool // leave out RateLimit-Limit, -Remaining, -Reset (the drafts up to -06)
	NoDraft      bool // leave out RateLimit-Policy and RateLimit (the current draft)
	XPrefix      bool // X-RateLimit-* instead of RateLimit-* for the legacy three
	NoRetryAfter bool // leave out Retry-After on a refusal
}

// ceilSeconds is a duration in whole seconds, rounded up: a client told to wait 0 s
// would come back too early.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// sfString is a Structured Fields String: quoted, `\` and `"` escaped, printable ASCII.
func sfString(text string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range text {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= ' ' && r <= '~':
			b.WriteRune(r)
		default:
			b.WriteByte('?')
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Headers are the HTTP headers of a result, as the Python and Node packages write them,
// every time in whole seconds rounded up:
//
//   - RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset for the quota that decided
//     (the IETF drafts up to -06; X-RateLimit-* with XPrefix);
//   - RateLimit-Policy, every quota the call checked ("name";q=limit;w=window_s), and
//     RateLimit, the one that decided ("name";r=remaining;t=reset_s): the current draft;
//   - Retry-After when refused.
func Headers(r Result, o HeaderOptions) map[string]string {
	reset := ceilSeconds(r.ResetAfter)
	h := map[string]string{}
	if !o.NoLegacy {
		prefix := "RateLimit-"
		if o.XPrefix {
			prefix = "X-RateLimit-"
		}
		h[prefix+"Limit"] = strconv.FormatInt(r.Limit, 10)
		h[prefix+"Remaining"] = strconv.FormatInt(r.Remaining, 10)
		h[prefix+"Reset"] = strconv.FormatInt(reset, 10)
	}
	if !o.NoDraft {
		quotas, binding := r.Quotas, r.Quota
		if len(quotas) == 0 {
			quotas = []Quota{{Name: "default", Limit: r.Limit}}
		}
		if binding == nil {
			binding = &quotas[0]
		}
		items := make([]string, len(quotas))
		for i, q := range quotas {
			items[i] = sfString(q.Name) + ";q=" + strconv.FormatInt(q.Limit, 10)
			if q.Window > 0 {
				items[i] += ";w=" + strconv.FormatInt(ceilSeconds(q.Window), 10)
			}
		}
		h["RateLimit-Policy"] = strings.Join(items, ", ")
		h["RateLimit"] = sfString(binding.Name) + ";r=" + strconv.FormatInt(r.Remaining, 10) + ";t=" + strconv.FormatInt(reset, 10)
	}
	if !o.NoRetryAfter && !r.Allowed {
		retry := ceilSeconds(r.RetryAfter)
		if retry < 1 {
			retry = 1
		}
		h["Retry-After"] = strconv.FormatInt(retry, 10)
	}
	return h
}
