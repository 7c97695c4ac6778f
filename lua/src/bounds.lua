-- The module's bounds (core/src/limits.rs), mirrored under the same names; a test
-- checks that they agree.
local MAX_SAFE_INTEGER = 9007199254740991 -- 2^53 - 1
local MIN_AT_MS = 1000000000000 -- 2001-09-09: a smaller AT is a time in seconds
local MAX_AT_MS = 4102444800000 -- 2100-01-01
local MAX_DURATION_MS = 315360000000 -- 3650 days
local MAX_KEYS = 64 -- keys per call (RL.MULTI)
local MAX_ALL_KEYS = 16 -- keys (one rule each) per call (RL.ALL)
local MAX_WINDOWS = 16 -- LIMITs per call (RL.MULTI)
local MAX_WINDOWS_PER_KEY = 32 -- windows one key keeps (RL.MULTI, RL.SLIDING)
local MAX_BUCKETS = 100 -- buckets per window (RL.SLIDING)
local DEFAULT_BUCKETS = 10 -- buckets per window without BUCKETS (RL.SLIDING)
local MAX_LOG_LIMIT = 10000 -- the largest limit (RL.LOG)
local MAX_LOG_MEMBERS = 20000 -- members (and cost of one member) a log holds: twice its largest limit (RL.LOG, FORCE)
local MAX_META_LEN = 256 -- bytes of a META value (RL.LOG)
local MAX_LEASE_LIMIT = 10000 -- the largest limit (RL.LEASE)
local MAX_ID_LEN = 256 -- bytes of a lease id (RL.LEASE, RL.RELEASE)
local MAX_END_MS = 4417804800000 -- the latest window end in stored state: MAX_AT_MS + MAX_DURATION_MS (RL.MULTI)
local MAX_AT_US = 4102444800000000 -- MAX_AT_MS in µs: the latest log entry, the latest bucket start (RL.LOG, RL.SLIDING)
local MAX_BUCKETS_PER_KEY = 1000 -- buckets one key keeps, its windows' BUCKETS added up (RL.SLIDING)
local MAX_LOG_TRIM = 64 -- members that left the window one write removes, oldest first (RL.LOG)
local MAX_BURST_WINDOW_US = 1576800000000000 -- 18250 days, 50 years (RL.GCRA)
local MAX_TAT_US = 5679244800000000 -- the latest AT plus the longest burst window (RL.GCRA)
local MAX_TAT_DIGITS = 16 -- digits of MAX_TAT_US
local ECHO_MAX = 64 -- bytes of a bad argument quoted in an error

-- The smallest value RL.GCRA stores: a time in µs no earlier than the earliest AT (RL.FIXED
-- refuses a count that can only be such a time).
local MIN_TAT_US = MIN_AT_MS * 1000
