module github.com/redis-ratelimit/redis-ratelimit/clients/go

go 1.22.0

require (
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis/go-redis/v9 v9.14.0
	github.com/redis/rueidis v1.0.55
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	golang.org/x/sys v0.30.0 // indirect
)
