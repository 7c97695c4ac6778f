"""The table of `make bench`: what is measured, one row per command.

A row names a native command line and, for an RL.* command, its Lua twin. The twin is
called with the same arguments (FCALL of its function in the library lua/ratelimit.lua,
and EVALSHA of its script lua/scripts/<function>.lua; keys as keys and the rest as
arguments, in the same order), so a row is one line:

    Row("RL.GCRA", native="RL.GCRA rl:gcra:__rand_int__ 1000000 1000000 1s",
        twin="rl_gcra", denied="RL.GCRA rl:gcra:__rand_int__ 0 1 1h"),

`__rand_int__` is redis-benchmark's placeholder: each occurrence becomes a random
12-digit number below the key space (100 000 keys by default, 1 000 in the denied mode).
Rows whose command the loaded module does not have are left out with a note, so this
table can list commands before they are merged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

# Where the keys are in a native command line, to build its twin's EVALSHA call (the
# names of core/src/commands.rs, `Keys`). Index 0 is the command name.
FIRST = "first"  # one key at index 1:              RL.FIXED key limit window ...
NUMKEYS = "numkeys"  # a count at 1, the keys after it: RL.MULTI 2 k1 k2 LIMIT ...


def all_from(index: int) -> str:
    """Every argument from `index` to the end is a key: RL.BULKEXPIRE seconds k1 k2 ..."""
    return f"from:{index}"


@dataclass
class Row:
    # The label in the tables: the command's name for native commands.
    name: str
    # The native command line, run as it is (None for a script-only row).
    native: Optional[str] = None
    # The twin's function (`rl_fixed`): run as FCALL of the library lua/ratelimit.lua
    # (the "function" variant) and as EVALSHA of its script lua/scripts/<function>.lua
    # (the "twin" variant).
    twin: Optional[str] = None
    # Where the keys of `native` are (FIRST, NUMKEYS or all_from(i)).
    keys: str = FIRST
    # The command line of the denied mode (limit 1 on a small key space, filled first).
    # For a script row: its arguments after EVALSHA sha, like `call`.
    denied: Optional[str] = None
    # A command line run on every key of the key space before the fill, for commands
    # that work on keys made by others (RL.BULKEXPIRE). Such rows get no memory figure.
    setup: Optional[str] = None
    # The command line that writes every key's state before a run, when the measured
    # command is not the cheap way to get it (default: the native command of the mode,
    # which leaves the state its twin leaves; a script row's own call).
    fill: Optional[str] = None
    # A script loaded as it is (not a twin), for rows without a native command...
    script: Optional[str] = None
    # ...and its arguments after `EVALSHA sha`: numkeys key [key ...] arg [arg ...].
    call: Optional[str] = None
    # For a script row: the row whose native command its cost is compared with.
    against: Optional[str] = None
    # A command of the floor module (bench/floor/floor.c): the least work a command of
    # that shape can do, measured in the same run.
    floor: bool = False
    # The floor row this native command's cost is divided by (allowed mode), and the
    # ratio it aims at (reported, never asserted).
    floor_of: Optional[str] = None
    target: Optional[float] = None
    # A plain Redis command shown for reference.
    reference: bool = False
    # The share of --requests each run of this row sends: a row whose calls cost many
    # single-key calls (several keys and windows, a hundred keys) sends fewer, so that
    # its runs take about as long as the others'. Native, twin and every repetition send
    # the same count; the time a row takes is its requests times their cost.
    share: float = 1.0
    # One line on what the row is, for the notes under the tables.
    about: str = ""


@dataclass
class Bulk:
    """Giving a TTL to keys that have none, over a whole key space: keys per second for
    one native command against the published loop (SCAN a chunk, EVAL a script on it)."""

    name: str
    # Keys created without a TTL before each run (DEBUG POPULATE <keys> <prefix>).
    keys: int
    prefix: str
    # One native call; `{cursor}` is replaced. Reply: [next_cursor, scanned, expired].
    native: str
    # The baseline: `scan` (with `{cursor}`) on the client, then EVALSHA of `script` on the
    # keys it returned (the script's reply: the keys it gave a TTL), on one connection.
    scan: str
    script: str = "bench/published-expire.lua"


ROWS: List[Row] = [
    Row(
        "FLOOR.REPLY",
        native="FLOOR.REPLY rl:floor:__rand_int__",
        floor=True,
        about="floor module: a call that only replies five integers",
    ),
    Row(
        "FLOOR.WRITE",
        native="FLOOR.WRITE rl:floor:w:__rand_int__",
        floor=True,
        about="floor module: one string read-modify-write with an absolute expiry (DMA, in place), "
        "the modified-key signal and the keyspace event, five integers back; not replicated",
    ),
    Row(
        "FLOOR.FIXED",
        native="FLOOR.FIXED rl:floor:f:__rand_int__",
        floor=True,
        about="floor module: FLOOR.WRITE plus the replicated effect (SET key value PXAT t): the least a "
        "single-key limiter write can do",
    ),
    Row(
        "FLOOR.MULTI",
        native="FLOOR.MULTI 2 rl:floor:ip:__rand_int__ rl:floor:user:__rand_int__",
        floor=True,
        about="floor module: FLOOR.FIXED on two keys in one call, a seven-field reply: the least a "
        "two-key limiter write can do",
    ),
    Row(
        "INCR",
        native="INCR rl:incr:__rand_int__",
        reference=True,
        about="one native counter write (its keys have no TTL)",
    ),
    Row(
        "SET PX",
        native="SET rl:set:__rand_int__ 1 PX 3600000",
        reference=True,
        about="a native write that sets a TTL, as every limiter write does",
    ),
    Row(
        "RL.FIXED",
        native="RL.FIXED rl:fixed:__rand_int__ 1000000 1h",
        twin="rl_fixed",
        keys=FIRST,
        denied="RL.FIXED rl:fixed:__rand_int__ 1 1h",
        floor_of="FLOOR.FIXED",
        target=1.05,
        about="fixed window; allowed: limit 1 000 000 per hour; denied: limit 1, key at its limit",
    ),
    Row(
        "RL.GCRA",
        native="RL.GCRA rl:gcra:__rand_int__ 1000000 1000000 1s",
        twin="rl_gcra",
        keys=FIRST,
        denied="RL.GCRA rl:gcra:__rand_int__ 0 1 1h",
        floor_of="FLOOR.FIXED",
        target=1.05,
        about="GCRA; allowed: 1 000 000 per second with a burst of 1 000 000; denied: 1 per hour, no burst, key used",
    ),
    Row(
        "RL.GCRA DELAY",
        native="RL.GCRA rl:gcrad:__rand_int__ 0 1000000 1s DELAY 1h",
        twin="rl_gcra",
        keys=FIRST,
        denied="RL.GCRA rl:gcrad:__rand_int__ 0 1 1h DELAY 1ms",
        floor_of="FLOOR.FIXED",
        about="GCRA with DELAY; allowed: every call booked (a million per second, no burst, DELAY 1 h: "
        "after the fill each key's queue runs ahead); denied: 1 per hour, DELAY 1 ms, key used",
    ),
    Row(
        "RL.MULTI",
        native="RL.MULTI 2 rl:multi:ip:__rand_int__ rl:multi:user:__rand_int__ "
        "LIMIT 1s 1000000 LIMIT 1m 1000000 LIMIT 1h 1000000",
        twin="rl_multi",
        keys=NUMKEYS,
        denied="RL.MULTI 2 rl:multi:ip:__rand_int__ rl:multi:user:__rand_int__ LIMIT 1m 1 LIMIT 1h 1 LIMIT 1d 1",
        floor_of="FLOOR.MULTI",
        target=1.4,
        share=0.4,
        about="2 identifiers x 3 windows, all or nothing; denied: limit 1 in every window",
    ),
    Row(
        "over_limit_multi_lua (published)",
        script="lua/published/over_limit_multi.lua",
        call="2 ip:__rand_int__ user:__rand_int__ [[1,1000000],[60,1000000],[3600,1000000]] 1700000000",
        denied="2 ip:__rand_int__ user:__rand_int__ [[60,1],[3600,1],[86400,1]] 1700000000",
        against="RL.MULTI",
        share=0.5,
        about="the published multi-window script (2 identifiers x 3 windows, INCR + EXPIRE each, answers 0/1)",
    ),
    Row(
        "RL.SLIDING",
        native="RL.SLIDING 2 rl:sliding:ip:__rand_int__ rl:sliding:user:__rand_int__ "
        "LIMIT 1s 1000000 LIMIT 1m 1000000 LIMIT 1h 1000000",
        twin="rl_sliding",
        keys=NUMKEYS,
        denied="RL.SLIDING 2 rl:sliding:ip:__rand_int__ rl:sliding:user:__rand_int__ "
        "LIMIT 1m 1 LIMIT 1h 1 LIMIT 1d 1",
        floor_of="FLOOR.MULTI",
        target=1.4,
        share=0.3,
        about="sliding windows, 2 identifiers x 3 windows of 10 buckets, all or nothing (the RL.MULTI row's "
        "windows); denied: limit 1 in every window",
    ),
    Row(
        "sliding_window_incr (published)",
        script="lua/published/sliding_window_incr.lua",
        call="1 {ratelimit:__rand_int__:}1605054195",
        against="RL.SLIDING",
        about="the article's per-second counter script (INCR + EXPIRE 16 s); the article's pattern also reads "
        "15 such keys with MGET and sums them on the client (see the limits library table)",
    ),
    Row(
        "RL.LOG",
        native="RL.LOG rl:log:__rand_int__ 10000 1h META user:42",
        twin="rl_log",
        keys=FIRST,
        denied="RL.LOG rl:log:__rand_int__ 1 1h META user:42",
        about="moving log; allowed: 10 000 per hour, a few entries per key; denied: limit 1, key used "
        "(the cost against the entries read is in its own table)",
    ),
    Row(
        "RL.LEASE",
        native="RL.LEASE rl:lease:__rand_int__ 10000 1h",
        twin="rl_lease",
        keys=FIRST,
        denied="RL.LEASE rl:lease:__rand_int__ 1 1h",
        floor_of="FLOOR.FIXED",
        about="concurrency limit; allowed: a new lease (an id made for it) of 10 000 per key, a few held per "
        "key; denied: limit 1, the slot held (the cost against the leases held is in its own table)",
    ),
    Row(
        "list_with_metadata (published)",
        script="lua/published/list_with_metadata.lua",
        call="1 ratelimit:__rand_int__ user:42",
        against="RL.LOG",
        about="the article's list script (RPUSH + EXPIRE 1 s); the article also reads LLEN first, a second "
        "round trip",
    ),
    Row(
        "RL.ALL",
        native="RL.ALL 3 rl:all:g:__rand_int__ rl:all:f:__rand_int__ rl:all:s:__rand_int__ "
        "GCRA 1 1000000 1000000 1s FIXED 2 1000000 1h SLIDING 3 LIMIT 1m 1000000",
        twin="rl_all",
        keys=NUMKEYS,
        denied="RL.ALL 3 rl:all:g:__rand_int__ rl:all:f:__rand_int__ rl:all:s:__rand_int__ "
        "GCRA 1 0 1 1h FIXED 2 1 1h SLIDING 3 LIMIT 1h 1",
        share=0.4,
        about="one call across algorithms: a GCRA, a fixed window and a sliding window on three keys, all or "
        "nothing (against the three single commands in its own table); denied: every rule at its limit",
    ),
    Row(
        "CL.THROTTLE",
        native="CL.THROTTLE rl:cell:__rand_int__ 99999 1 1",
        twin="cl_throttle",
        keys=FIRST,
        denied="CL.THROTTLE rl:cell:__rand_int__ 0 1 3600",
        floor_of="FLOOR.FIXED",
        about="redis-cell's command on RL.GCRA; allowed: 1 per second with a burst of 100 000; denied: 1 per "
        "hour, key used (against redis-cell itself in its own table, when a build of it is given)",
    ),
    Row(
        "RL.BULKEXPIRE",
        native="RL.BULKEXPIRE 60 " + " ".join(["rl:bulk:__rand_int__"] * 100),
        twin="rl_bulkexpire",
        keys=all_from(2),
        setup="SET rl:bulk:__rand_int__ x",
        fill="EXPIRE rl:bulk:__rand_int__ 60",
        share=0.1,
        about="100 keys per call (made without TTL first; later calls find most with a TTL, as in a re-run)",
    ),
    Row(
        "RL.FIXED hand-written script",
        script="bench/lua/fixed_minimal.lua",
        call="1 rl:hfixed:__rand_int__ 1000000 3600000",
        denied="1 rl:hfixed:__rand_int__ 1 3600000",
        against="RL.FIXED",
        about="the least a hand-written script does for RL.FIXED's job and reply (GET, SET PX or INCRBY, "
        "PTTL; five fields), no argument checks: the baseline of the twin's function and script",
    ),
    Row(
        "RL.GCRA hand-written script",
        script="bench/lua/gcra_minimal.lua",
        call="1 rl:hgcra:__rand_int__ 1000000 1000000 1000",
        denied="1 rl:hgcra:__rand_int__ 0 1 3600000",
        against="RL.GCRA",
        about="the least a hand-written GCRA script does for RL.GCRA's job and reply (TIME, GET, SET PX; "
        "five fields), no argument checks: the baseline of the twin's function and script",
    ),
    Row(
        "RL.SLIDING hand-written script",
        script="bench/lua/sliding_minimal.lua",
        call="2 rl:hsliding:ip:__rand_int__ rl:hsliding:user:__rand_int__ 1000 1000000 60000 1000000 "
        "3600000 1000000",
        denied="2 rl:hsliding:ip:__rand_int__ rl:hsliding:user:__rand_int__ 60000 1 3600000 1 86400000 1",
        against="RL.SLIDING",
        share=0.3,
        about="a hand-written sliding-window script for RL.SLIDING's job, state and reply (2 keys x 3 "
        "windows of 10 buckets, RL.SLIDING's string per key: TIME, GET, SET PXAT; seven fields), no argument "
        "checks: the baseline of the twin's function and script",
    ),
    Row(
        "INCR+PEXPIRE script",
        script="bench/lua/incr_pexpire.lua",
        call="1 rl:lua:__rand_int__ 3600000",
        against="RL.FIXED",
        about="the plainest fixed-window Lua script (INCR, then PEXPIRE), no checks",
    ),
]

BULK: List[Bulk] = [
    Bulk(
        "RL.SWEEP vs SCAN + EVAL",
        keys=1_000_000,
        prefix="bulk",
        # RL.SWEEP's default chunk (1 000 keys) against the bulk-TTL article's loop (SCAN
        # COUNT 100, one EVAL of its expire.lua per chunk).
        native="RL.SWEEP {cursor} 60 MATCH bulk:*",
        scan="SCAN {cursor} MATCH bulk:* COUNT 100",
    ),
]
