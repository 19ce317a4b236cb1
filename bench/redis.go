package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/plaudit/plaudit/engine"
)

// RedisInstall is what the harness prints when redis-server is not on PATH.
const RedisInstall = "redis-server not on PATH: Redis rows skipped (install with `apt-get install -y redis-server`)"

// RedisProcess is a redis-server the harness started.
type RedisProcess struct {
	*Process
	Addr string
	AOF  bool // appendonly yes, appendfsync always
}

// StartRedis starts redis-server (bin) on a free loopback port over dir:
// without persistence (no RDB, no AOF), or with aof, an append-only file
// synced before every write is answered (appendfsync always): the
// durability Plaudit gives a signal.
func StartRedis(bin, dir, logDir string, aof bool) (*RedisProcess, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(addr, ":")
	args := []string{"--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--daemonize", "no", "--protected-mode", "yes"}
	if aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	logPath, err := nextLog(logDir, "redis")
	if err != nil {
		return nil, err
	}
	p, err := startProcess(bin, args, nil, logPath)
	if err != nil {
		return nil, err
	}
	r := &RedisProcess{Process: p, Addr: addr, AOF: aof}
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for rc.Ping(context.Background()).Err() != nil {
		if p.exited() || time.Now().After(deadline) {
			_ = p.Stop()
			return nil, fmt.Errorf("bench: redis-server not answering PING\n%s", p.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r, nil
}

// RedisServerPath is redis-server's path on PATH, or "".
func RedisServerPath() string {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return ""
	}
	return p
}

// redisAgent is the hash holding the select agent's posteriors, one
// field per parameter: v<i>:a and v<i>:b.
const redisAgent = "bench:agent"

// seedRedisAgent writes SelectVariations posteriors, spread as
// NewSelectAgent spreads Plaudit's.
func seedRedisAgent(rc *redis.Client) error {
	fields := make([]any, 0, 4*SelectVariations)
	for i := range SelectVariations {
		score := -1 + 2*float64(i)/(SelectVariations-1)
		a, b := 1.0, 1.0
		if score > 0 {
			a += selectFeedback * score
		} else {
			b -= selectFeedback * score
		}
		fields = append(fields, fmt.Sprintf("v%d:a", i+1), a, fmt.Sprintf("v%d:b", i+1), b)
	}
	return rc.HSet(context.Background(), redisAgent, fields...).Err()
}

// RedisSelect is selection the way a user would build it on Redis with a
// maintained client: HGETALL of the agent's posteriors, then one Beta
// draw per variation (engine.SampleBeta) and the highest wins, in the
// client. c workers share one go-redis pool of c connections.
func RedisSelect(addr string, l Loop) (Result, error) {
	rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: l.C + 1, MinIdleConns: l.C})
	defer rc.Close()
	if err := seedRedisAgent(rc); err != nil {
		return Result{}, fmt.Errorf("bench: redis seed: %w", err)
	}
	return l.Run(func(w int) (Op, error) {
		rnd := rand.New(rand.NewPCG(uint64(w), 2))
		ctx := context.Background()
		return func() error {
			h, err := rc.HGetAll(ctx, redisAgent).Result()
			if err != nil {
				return err
			}
			best, bestV := -1.0, 0
			for i := 1; i <= SelectVariations; i++ {
				a, errA := strconv.ParseFloat(h["v"+strconv.Itoa(i)+":a"], 64)
				b, errB := strconv.ParseFloat(h["v"+strconv.Itoa(i)+":b"], 64)
				if errA != nil || errB != nil {
					return errors.New("bench: redis posterior missing")
				}
				if x := engine.SampleBeta(rnd, a, b); x > best {
					best, bestV = x, i
				}
			}
			if bestV == 0 {
				return errors.New("bench: redis select chose nothing")
			}
			return nil
		}, nil
	})
}

// RedisFeedback is a feedback score of 0.5 the way a user would apply it
// on Redis: HINCRBYFLOAT of the variation's alpha (s > 0 adds s to α).
func RedisFeedback(addr string, l Loop) (Result, error) {
	rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: l.C + 1, MinIdleConns: l.C})
	defer rc.Close()
	if err := seedRedisAgent(rc); err != nil {
		return Result{}, fmt.Errorf("bench: redis seed: %w", err)
	}
	return l.Run(func(w int) (Op, error) {
		field := fmt.Sprintf("v%d:a", w%SelectVariations+1)
		ctx := context.Background()
		return func() error { return rc.HIncrByFloat(ctx, redisAgent, field, 0.5).Err() }, nil
	})
}
