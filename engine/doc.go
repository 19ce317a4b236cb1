// Package engine is Plaudit's domain: one agent's runs, signals and objective
// versions, and the rewards computed from them on read.
//
// An *Agent is a deterministic state machine with no goroutines and no I/O.
// Execute validates a command against the current state, applies the events
// it decides on and returns them for the caller to persist; Replay applies a
// persisted event during recovery. Both paths go through the same apply
// functions, so replayed state equals live state by construction. Time and
// randomness are arguments.
package engine
