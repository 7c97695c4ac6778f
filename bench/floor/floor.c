/*
 * The floor of `make bench`: commands that do only the work every limiter of a given
 * shape cannot avoid, so that each RL.* command's cost can be read as a ratio to the
 * least a module can spend on the same job. Not a limiter: no argument checks, no
 * limit, no window arithmetic; a counter that goes up by one.
 *
 *   FLOOR.REPLY key            reply five integers (the cost of a call and its reply)
 *   FLOOR.WRITE key            one string read-modify-write with an absolute expiry:
 *                              open the key, read the value in place (DMA) and its
 *                              absolute expiry, write the new value in place (a new key
 *                              gets its value and an expiry one hour ahead), signal the
 *                              modified key and send the keyspace event; reply five
 *                              integers
 *   FLOOR.FIXED key            FLOOR.WRITE, plus replication of the effect as
 *                              `SET key value PXAT t`: what a fixed-window or GCRA write
 *                              must do
 *   FLOOR.MULTI numkeys key... FLOOR.FIXED on every key, one seven-field reply (the five
 *                              integers, a key and a window): the floor of a command that
 *                              writes several keys in one call
 *
 * Built by bench/floor.py against the redismodule.h that ships in the redis-module
 * crate's sources, loaded next to the module by bench/bench.py.
 */
#include <string.h>
#include <stdio.h>
#include "redismodule.h"

#define HOUR_MS 3600000LL

/* Add one to the counter in `name` and return it; -1 after replying an error. */
static long long bump(RedisModuleCtx *ctx, RedisModuleString *name, int replicate) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    long long value = 0;
    mstime_t expiry;
    char buf[24];
    if (type == REDISMODULE_KEYTYPE_STRING) {
        size_t len;
        char *p = RedisModule_StringDMA(key, &len, REDISMODULE_READ | REDISMODULE_WRITE);
        for (size_t i = 0; i < len && p[i] >= '0' && p[i] <= '9'; i++) value = value * 10 + (p[i] - '0');
        expiry = RedisModule_GetAbsExpire(key);
        value++;
        int n = snprintf(buf, sizeof buf, "%lld", value);
        if ((size_t)n != len) {
            RedisModule_StringTruncate(key, n);
            p = RedisModule_StringDMA(key, &len, REDISMODULE_WRITE);
        }
        memcpy(p, buf, n);
        if (replicate) RedisModule_Replicate(ctx, "SET", "sbcl", name, buf, (size_t)n, "PXAT", expiry);
    } else if (type == REDISMODULE_KEYTYPE_EMPTY) {
        value = 1;
        expiry = RedisModule_Milliseconds() + HOUR_MS;
        RedisModuleString *one = RedisModule_CreateString(ctx, "1", 1);
        RedisModule_StringSet(key, one);
        RedisModule_FreeString(ctx, one);
        RedisModule_SetAbsExpire(key, expiry);
        if (replicate) RedisModule_Replicate(ctx, "SET", "sccl", name, "1", "PXAT", expiry);
    } else {
        RedisModule_CloseKey(key);
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return -1;
    }
    RedisModule_SignalModifiedKey(ctx, name);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_STRING, "set", name);
    RedisModule_CloseKey(key);
    return value;
}

static void reply_five(RedisModuleCtx *ctx, long long value) {
    RedisModule_ReplyWithArray(ctx, 5);
    RedisModule_ReplyWithLongLong(ctx, 0);
    RedisModule_ReplyWithLongLong(ctx, 1000000);
    RedisModule_ReplyWithLongLong(ctx, 1000000 - value);
    RedisModule_ReplyWithLongLong(ctx, -1);
    RedisModule_ReplyWithLongLong(ctx, HOUR_MS);
}

static int Reply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    if (argc != 2) return RedisModule_WrongArity(ctx);
    reply_five(ctx, 1);
    return REDISMODULE_OK;
}

static int write_one(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int replicate) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    long long v = bump(ctx, argv[1], replicate);
    if (v > 0) reply_five(ctx, v);
    return REDISMODULE_OK;
}

static int Write(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return write_one(ctx, argv, argc, 0);
}

static int Fixed(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return write_one(ctx, argv, argc, 1);
}

static int Multi(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    long long n;
    if (argc < 3 || RedisModule_StringToLongLong(argv[1], &n) != REDISMODULE_OK || n < 1 || n > argc - 2)
        return RedisModule_WrongArity(ctx);
    long long least = 0;
    for (long long i = 0; i < n; i++) {
        long long v = bump(ctx, argv[2 + i], 1);
        if (v <= 0) return REDISMODULE_OK;
        if (v > least) least = v;
    }
    RedisModule_ReplyWithArray(ctx, 7);
    RedisModule_ReplyWithLongLong(ctx, 0);
    RedisModule_ReplyWithLongLong(ctx, 1000000);
    RedisModule_ReplyWithLongLong(ctx, 1000000 - least);
    RedisModule_ReplyWithLongLong(ctx, -1);
    RedisModule_ReplyWithLongLong(ctx, HOUR_MS);
    RedisModule_ReplyWithString(ctx, argv[2]);
    RedisModule_ReplyWithLongLong(ctx, HOUR_MS);
    return REDISMODULE_OK;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.reply", Reply, "readonly fast", 1, 1, 1) == REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.write", Write, "write fast", 1, 1, 1) == REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.fixed", Fixed, "write fast", 1, 1, 1) == REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.multi", Multi, "write", 2, -1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
