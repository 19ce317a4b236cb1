//go:build race

package pebblelog

// The race detector slows Pebble's write path about tenfold; the crash test
// scales its work down to stay within the package's time budget.
const raceEnabled = true
