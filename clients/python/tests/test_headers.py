"""HTTP headers from results: the RateLimit-* fields, the IETF draft's structured
fields with one policy per limit, Retry-After rounded up."""

from __future__ import annotations

import pytest
import redis

from redis_native_ratelimit import IETF_DRAFT, Quota, RateLimit, RateLimiter, Throttle, ceil_seconds, ratelimit_headers

T = 1_900_000_000_000


def test_ceil_seconds_never_rounds_down():
    assert [ceil_seconds(ms) for ms in (0, 1, 999, 1000, 1001, 30000)] == [0, 1, 1, 1, 2, 30]


def test_draft_revision_is_named():
    assert IETF_DRAFT == "draft-ietf-httpapi-ratelimit-headers-10"


def test_allowed_and_denied_gcra(server, tag):
    rl = RateLimiter(redis.Redis(port=server.port))
    seen = [rl.gcra(tag + "u", 2, 1, "10s", at=T) for _ in range(4)]
    assert ratelimit_headers(seen[0]) == {
        "RateLimit-Limit": "3",
        "RateLimit-Remaining": "2",
        "RateLimit-Reset": "10",
        "RateLimit-Policy": '"gcra";q=3;w=30',
        "RateLimit": '"gcra";r=2;t=10',
    }
    assert ratelimit_headers(seen[3], standard_headers=False, legacy_headers=True) == {
        "X-RateLimit-Limit": "3",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": "30",
        "Retry-After": "10",
    }
    assert ratelimit_headers(seen[3], standard_headers="draft-8", retry_after=False) == {
        "RateLimit-Policy": '"gcra";q=3;w=30',
        "RateLimit": '"gcra";r=0;t=30',
    }
    # The drafts as express-rate-limit 8 names them.
    assert ratelimit_headers(seen[0], standard_headers="draft-6") == {
        "RateLimit-Policy": "3;w=30",
        "RateLimit-Limit": "3",
        "RateLimit-Remaining": "2",
        "RateLimit-Reset": "10",
    }
    assert ratelimit_headers(seen[3], standard_headers="draft-7") == {
        "RateLimit-Policy": "3;w=30",
        "RateLimit": "limit=3, remaining=0, reset=30",
        "Retry-After": "10",
    }
    # A lease's refusal says when to come back, not when the oldest lease ends.
    assert ratelimit_headers(seen[3], standard_headers=False, retry_after_ms=1000) == {"Retry-After": "1"}


def test_standard_headers_takes_the_drafts_or_false():
    result = RateLimit(True, 4, 3, -1, 250)
    assert ratelimit_headers(result, standard_headers=False) == {}
    assert ratelimit_headers(result, standard_headers=True) == ratelimit_headers(result, standard_headers="draft-6")
    assert ratelimit_headers(result) == ratelimit_headers(result, standard_headers=["draft-6", "draft-8"])
    with pytest.raises(ValueError, match="draft-9"):
        ratelimit_headers(result, standard_headers="draft-9")


def test_multi_lists_every_policy_and_names_the_binding_one(server, tag):
    rl = RateLimiter(redis.Redis(port=server.port))
    keys = [tag + "ip", tag + "user"]
    limits = [("1s", 2), ("1m", 3)]
    for _ in range(2):
        rl.multi(keys, limits, at=T, names=["ip", "user"])
    # Half a second later the per-second windows are full: the address's binds.
    denied = rl.multi(keys, limits, at=T + 500, names=["ip", "user"])
    headers = ratelimit_headers(denied, standard_headers="draft-8")
    assert headers == {
        "RateLimit-Policy": '"ip-1s";q=2;w=1, "ip-1m";q=3;w=60, "user-1s";q=2;w=1, "user-1m";q=3;w=60',
        "RateLimit": '"ip-1s";r=0;t=1',
        "Retry-After": "1",
    }
    # A second later the minute windows bind.
    later = rl.multi(keys, limits, at=T + 1000, names=["ip", "user"])
    assert ratelimit_headers(later)["RateLimit"] == '"ip-1m";r=0;t=59'


def test_retry_after_rounds_up_and_is_at_least_one_second():
    denied = RateLimit(False, 5, 0, 1, 1, quotas=(Quota("q", 5, 1500),), binding=0)
    headers = ratelimit_headers(denied)
    assert headers["Retry-After"] == "1"
    assert headers["RateLimit-Policy"] == '"q";q=5;w=2'
    assert ratelimit_headers(RateLimit(False, 5, 0, 1001, 1001))["Retry-After"] == "2"


def test_names_are_structured_field_strings():
    result = RateLimit(True, 1, 0, -1, 0, quotas=(Quota('a "b"\\c\n', 1, None),), binding=0)
    assert ratelimit_headers(result, standard_headers="draft-8")["RateLimit-Policy"] == '"a \\"b\\"\\\\c?";q=1'


def test_results_without_quotas_get_a_default_policy():
    assert ratelimit_headers(RateLimit(True, 4, 3, -1, 250), standard_headers="draft-8") == {
        "RateLimit-Policy": '"default";q=4',
        "RateLimit": '"default";r=3;t=1',
    }


def test_throttle_results_are_already_in_seconds():
    assert ratelimit_headers(Throttle(False, 3, 0, 7, 20), standard_headers="draft-6") == {
        "RateLimit-Policy": "3",
        "RateLimit-Limit": "3",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "20",
        "Retry-After": "7",
    }
