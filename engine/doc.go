// Package engine is Plaudit's domain: one agent's runs, signals, objective
// versions, variations, feedback and reports, and the rewards computed from
// them on read.
//
// An *Agent is a deterministic state machine with no goroutines and no I/O.
// Each command is a method (CreateRun, RecordSignal, …) that validates the
// command against the current state, applies the events it decides on and
// returns its typed answer with the events, for the caller to persist.
// Replay applies a persisted event during recovery, and Restore rebuilds an
// agent from a snapshot by turning it back into events. All three go
// through the one apply function, which also stamps each event's sequence
// number on what it records, so live, replayed and restored state are the
// same by construction (and a test compares them query by query). Time
// and randomness are arguments.
package engine
