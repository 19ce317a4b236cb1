// Package bench measures Plaudit against the building blocks it is made of,
// on the same machine and in the same run: durable ingest against a synced
// Pebble write (the floor for a durable signal) and a bare fasthttp round
// trip (the floor for any HTTP answer); selection (run creation) against
// that fasthttp round trip and a bare NATS echo (the floor for any NATS
// answer); judged rewards (seed 003) against that fasthttp round trip, the
// engine's own scoring in process, and the bare NATS hop of a judge
// request. Figures are meant to be read as ratios against those baselines,
// never as absolute numbers, since the machines they run on are noisy;
// nothing here asserts a time.
//
// The harness is a closed loop: each of c workers issues its next operation
// when the previous one has answered, so ops/s at c>1 shows how well
// concurrent requests share work (Pebble's group commit) and the latency
// percentiles show what one caller waits.
package bench
