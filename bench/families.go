package bench

import "fmt"

// scenario is one workload of a family, run at each concurrency.
type scenario struct {
	name string
	// base names the building block this row is divided by ("" for a
	// building block); vs the same workload built another way, if any: on
	// Redis, or on the bare libraries (the durable floor). Both run
	// earlier in the suite, at the same concurrency.
	base, vs string
	// proc is whose CPU the row's cpu/op is: procServer, procHello,
	// procRedis, procRedisAOF or procBench.
	proc string
	// minC skips the row below that concurrency, where it would measure
	// what another row does; maxC (0: none) above it.
	minC, maxC int
	// opsDiv divides the row's op count (0 or 1: all of them), for rows
	// whose operation costs a hundred of the others'.
	opsDiv int
	run    func(s *suite, l Loop) (Result, error)
}

const (
	procServer   = "server"
	procHello    = "hello"
	procRedis    = "redis"
	procRedisAOF = "redis-aof"
	procBench    = "bench"
)

// family is one table: rows measured on one fresh child server.
type family struct {
	name string
	rows []scenario
}

// families is the suite, in the order it runs: building blocks before
// the rows divided by them.
var families = []family{
	{"select", []scenario{
		{name: "nats-echo", proc: procHello, run: func(s *suite, l Loop) (Result, error) {
			return NATSHelloEcho(s.hello.NATS, s.hello.Key, l)
		}},
		{name: "http-hello", proc: procHello, run: func(s *suite, l Loop) (Result, error) {
			return HTTPHello(s.hello.HTTP, l)
		}},
		{name: "beta-draws", proc: procBench, maxC: 1, run: func(_ *suite, l Loop) (Result, error) { return BetaDraws(l) }},
		{name: "redis-select", proc: procRedis, run: func(s *suite, l Loop) (Result, error) { return RedisSelect(s.redis.Addr, l) }},
		{name: "nats-select", base: "nats-echo", vs: "redis-select", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			agent, err := s.selectAgent()
			if err != nil {
				return Result{}, err
			}
			return NATSSelect(s.target.NATS, s.target.Key, agent, l)
		}},
		{name: "http-select", base: "http-hello", vs: "redis-select", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			agent, err := s.selectAgent()
			if err != nil {
				return Result{}, err
			}
			return HTTPSelect(s.target.HTTP, s.target.Key, agent, l)
		}},
	}},
	{"ingest", []scenario{
		{name: "raw-pebble", proc: procBench, run: func(s *suite, l Loop) (Result, error) {
			return RawPebbleAppend(s.dir(fmt.Sprintf("raw-pebble-c%d", l.C)), l)
		}},
		{name: "http-pebble", proc: procHello, run: func(s *suite, l Loop) (Result, error) {
			return HTTPDurableHello(s.hello.HTTP, l)
		}},
		{name: "nats-pebble", proc: procHello, run: func(s *suite, l Loop) (Result, error) {
			return NATSDurableEcho(s.hello.NATS, s.hello.Key, l)
		}},
		{name: "http-signal", base: "raw-pebble", vs: "http-pebble", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			return HTTPSignalIngest(s.target.HTTP, s.target.Key, l)
		}},
		{name: "nats-signal", base: "raw-pebble", vs: "nats-pebble", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			return NATSSignalIngest(s.target.HTTP, s.target.NATS, s.target.Key, l)
		}},
		{name: "http-signal-agents", base: "raw-pebble", vs: "http-pebble", proc: procServer, minC: 2, run: func(s *suite, l Loop) (Result, error) {
			return HTTPSignalIngestAgents(s.target.HTTP, s.target.Key, l)
		}},
	}},
	{"feedback", []scenario{
		{name: "redis-feedback", proc: procRedis, run: func(s *suite, l Loop) (Result, error) { return RedisFeedback(s.redis.Addr, l) }},
		{name: "redis-feedback-aof", proc: procRedisAOF, run: func(s *suite, l Loop) (Result, error) { return RedisFeedback(s.redisAOF.Addr, l) }},
		{name: "http-feedback", base: "raw-pebble", vs: "redis-feedback-aof", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			return HTTPFeedback(s.target.HTTP, s.target.Key, l)
		}},
		{name: "http-report-idem", base: "raw-pebble", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			return HTTPReportWithKey(s.target.HTTP, s.target.Key, l)
		}},
	}},
	{"reads", []scenario{
		readRow(10), readRow(100), readRow(1000),
		{name: "version-summary", base: "http-hello", proc: procServer, opsDiv: 10, run: func(s *suite, l Loop) (Result, error) {
			return HTTPVersionSummary(s.target.HTTP, s.target.Key, s.opts.SummaryRuns, false, l)
		}},
		{name: "version-summary-again", base: "http-hello", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			return HTTPVersionSummary(s.target.HTTP, s.target.Key, s.opts.SummaryRuns, true, l)
		}},
		{name: "select-summarised", base: "http-hello", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			return HTTPSelectSummarised(s.target.HTTP, s.target.Key, s.opts.SummaryRuns, 0, l)
		}},
		{name: "select-beside-summaries", base: "select-summarised", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			return HTTPSelectSummarised(s.target.HTTP, s.target.Key, s.opts.SummaryRuns, 1, l)
		}},
	}},
	{"judged", []scenario{
		{name: "reward-inproc", proc: procBench, maxC: 1, run: func(_ *suite, l Loop) (Result, error) { return InProcessReward(l) }},
		{name: "http-reward", base: "http-hello", proc: procServer, run: func(s *suite, l Loop) (Result, error) {
			return HTTPJudgedReward(s.target.HTTP, s.target.Key, l)
		}},
		{name: "http-reward-judge", base: "http-reward", proc: procServer, maxC: 1, run: func(s *suite, l Loop) (Result, error) {
			return HTTPModelJudgeReward(s.target.HTTP, s.target.NATS, s.target.Key, l)
		}},
	}},
}

// readRow reads the reward of a run of n signals.
func readRow(n int) scenario {
	return scenario{name: fmt.Sprintf("reward-read-%d", n), base: "http-hello", proc: procServer,
		run: func(s *suite, l Loop) (Result, error) { return HTTPRewardRead(s.target.HTTP, s.target.Key, n, l) }}
}
