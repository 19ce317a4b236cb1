// Package pebblelog implements persist.Store on Pebble.
//
// # Key layout
//
// Three namespaces, each behind a one-byte tag and a '/', so that no directory
// key can collide with log data whatever bytes the caller chooses:
//
//	e/<agent>/<seq>   event record; <seq> is 8 bytes big-endian, so byte order
//	                  is sequence order
//	e/<agent>0        the agent's high-water mark: the last seq ever
//	                  appended, written in the batch of every append
//	s/<agent>         the agent's snapshot
//	h/<agent>         the high-water mark of stores written before the one
//	                  above; still read (the larger counts), no longer written
//	d/<key>           directory entry (caller's key verbatim)
//
// Agent ids never contain '/', so "e/<agent>/" is a prefix of exactly that
// agent's events and "e/<agent>0" ('/'+1) bounds them from above: the mark
// sorts right after the agent's newest event, outside the events' range.
//
// # Values
//
// An event record is CRC32C(key, payload) as 4 bytes big-endian followed by
// the payload. The key spells out agent and seq, so the checksum covers them:
// a record copied under the wrong key is caught as well as a flipped bit.
//
// A snapshot is a format byte (1), the covered seq (8 bytes big-endian),
// CRC32C(key, seq, compressed) (4 bytes big-endian), then the zstd frame of
// the state (the frame carries its own content checksum as well). Decoding is
// capped at Options.MaxSnapshotSize.
//
// # Durability
//
// Every write is one pebble.Batch committed with pebble.Sync. Pebble's commit
// pipeline gathers concurrent batches into one WAL write and one fsync, so
// agents committing at the same time share the cost; nothing here serialises
// writers. SaveSnapshot writes the snapshot and DeleteRange-trims the events
// it covers in one batch, so recovery never sees a trimmed log without the
// snapshot that replaces it.
//
// Pebble's WAL already makes each batch atomic, so a torn event record is not
// expected from Pebble itself; Load still treats a bad final record above
// the high-water mark as torn (dropped and deleted), and any other bad
// record as corruption. A log that ends below the high-water mark lost
// acknowledged events (a table or WAL lost or restored from an older copy):
// Load refuses it with ErrCorrupt rather than serve the agent rolled back.
// A truncated newest WAL takes the mark back with the events, so that loss
// cannot be seen here; Pebble logs it when it replays the WAL (see
// Options.Logger).
package pebblelog
