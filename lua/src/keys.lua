-- Time, and reading keys as the limiters keep them.

-- The server clock in µs (TIME, as the module reads it). The library remembers the
-- last second it read: a call converts only the microseconds.
local function clock_us()
  local t = redis.call('TIME')
  local s = t[1]
  if MEMO then
    local clock = MEMO.clock
    if s ~= clock[1] then clock[1], clock[2] = s, tonumber(s) * 1000000 end
    return clock[2] + tonumber(t[2])
  end
  return tonumber(s) * 1000000 + tonumber(t[2])
end

-- Milliseconds rounded down / up from µs (exact below 2^53).
local function floor_ms(us)
  return (us - us % 1000) / 1000
end
local function ceil_ms(us)
  us = us + 999
  return (us - us % 1000) / 1000
end

-- A number read from stored state: 1 to 19 digits, at most `max` (a double holds it exactly); nil if not.
local function stored_number(s, max)
  if not s or #s == 0 or #s > 19 or not string.match(s, '^%d+$') then return nil end
  local sig = string.gsub(s, '^0+', '')
  if #sig > 16 then return nil end
  local n = tonumber(sig ~= '' and sig or '0')
  if n > max then return nil end
  return n
end

-- The same for a number that a pattern's %d+ (or [%d]*) captured: at most 15 digits
-- are read as they are.
local function stored_digits(s, max)
  if #s == 0 or #s > 15 then return stored_number(s, max) end
  local n = tonumber(s)
  if n > max then return nil end
  return n
end

-- Open a key as limiter L keeps it: a string's value (nil when missing) and, when
-- L.expiry, its absolute expiry in ms (nil: no TTL); a sorted set: its number of
-- members (false when missing). Another type: WRONGTYPE.
local function open_key(L, key)
  if L.storage == 'string' then
    -- A value is a string or false; an error, a table (a string's `err` is nil).
    local v = redis.pcall('GET', key)
    if not v then return v end
    if v.err then fail(WRONGTYPE) end
    if not L.expiry then return v end
    local exp = redis.call('PEXPIRETIME', key)
    if exp < 0 then return v, nil end
    return v, exp
  end
  -- A count, or an error (a table).
  local card = redis.pcall('ZCARD', key)
  if type(card) ~= 'number' then fail(WRONGTYPE) end
  if card == 0 then return false end
  return card
end
