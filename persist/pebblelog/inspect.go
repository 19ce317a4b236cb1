package pebblelog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/plaudit/plaudit/persist"
)

// InspectOptions tunes Inspect. The zero value is ready to use.
type InspectOptions struct {
	FS              vfs.FS // nil means vfs.Default
	MaxSnapshotSize uint64 // as Options.MaxSnapshotSize
	// CheckEvent and CheckState, when set, also decode every event payload
	// and snapshot state (the engine's codec does); an error is a problem
	// of the agent. The store's checksums are checked either way.
	CheckEvent func(payload []byte) error
	CheckState func(state []byte) error
}

// Report is what Inspect found in a data directory.
type Report struct {
	Dir       string        `json:"dir"`
	Format    string        `json:"pebble_format"`
	Files     []FileReport  `json:"files"`
	Agents    []AgentReport `json:"agents"`
	Directory []DirGroup    `json:"directory"`
	Problems  []Problem     `json:"problems"`
}

// FileReport is one file of the data directory.
type FileReport struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // table, wal, manifest, options, marker, lock, ballast, other
	Size int64  `json:"size"`
}

// AgentReport is one agent's log and snapshot.
type AgentReport struct {
	ID         string `json:"id"`
	Events     int    `json:"events"` // in the log, after the snapshot
	EventBytes int64  `json:"event_bytes"`
	FirstSeq   uint64 `json:"first_seq"` // of the log; 0 when it is empty
	LastSeq    uint64 `json:"last_seq"`
	HighWater  uint64 `json:"high_water"`
	// SnapshotSeq is the last event the snapshot covers; 0 without one.
	SnapshotSeq   uint64 `json:"snapshot_seq"`
	SnapshotBytes int64  `json:"snapshot_bytes"` // stored (compressed)
	StateBytes    int64  `json:"state_bytes"`    // decompressed
}

// DirGroup counts the directory entries whose key starts with Prefix up to
// its first '/'.
type DirGroup struct {
	Prefix  string `json:"prefix"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

// Problem is one piece of corruption, naming the file or agent it is in.
type Problem struct {
	File   string `json:"file,omitempty"`
	Agent  string `json:"agent,omitempty"`
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString("file " + p.File + ": ")
	}
	if p.Agent != "" {
		b.WriteString("agent " + p.Agent + ": ")
	}
	b.WriteString(p.Detail)
	return b.String()
}

// maxProblems bounds the problems a report lists; a directory corrupt
// throughout would otherwise list every record.
const maxProblems = 1000

// Err is nil when nothing is corrupt, else an error wrapping
// persist.ErrCorrupt that lists the problems.
func (r *Report) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	lines := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		lines[i] = p.String()
	}
	return fmt.Errorf("%s: %w:\n  %s", r.Dir, persist.ErrCorrupt, strings.Join(lines, "\n  "))
}

func (r *Report) problem(p Problem) {
	switch {
	case len(r.Problems) < maxProblems:
		r.Problems = append(r.Problems, p)
	case len(r.Problems) == maxProblems:
		r.Problems = append(r.Problems, Problem{Detail: "more problems not listed"})
	}
}

// Inspect reads every file and every key of the store in dir, which must
// not be open (Pebble's lock refuses a directory a server holds), and
// writes nothing to it. It checks:
//
//   - every block checksum of every live table (sstable's
//     ValidateBlockChecksums, index and filter blocks included); the WAL's
//     record checksums are checked as Pebble replays it on open;
//   - every event record's CRC32C and key, the contiguity of each agent's
//     log from its snapshot, that it reaches the high-water mark (as Load
//     does), and every snapshot's checksum and zstd frame.
//
// The error is for a directory that cannot be inspected at all (absent,
// locked, a manifest Pebble cannot read); corruption found is listed in
// Report.Problems (see Report.Err).
func Inspect(dir string, o InspectOptions) (r *Report, err error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.MaxSnapshotSize == 0 {
		o.MaxSnapshotSize = defaultMaxSnapshotSize
	}
	r = &Report{Dir: dir}
	if r.Files, err = listFiles(o.FS, dir); err != nil {
		return nil, err
	}
	// Pebble reports what it cannot go on from through Logger.Fatalf,
	// which slogLogger raises as a panic: here it is the error.
	defer func() {
		if p := recover(); p != nil {
			if f, ok := p.(fatal); ok {
				r, err = nil, fmt.Errorf("inspect %s: %s: %w", dir, f.msg, persist.ErrCorrupt)
				return
			}
			panic(p)
		}
	}()
	// Corruption met while reading is reported through the errors of the
	// reads; the listener only keeps Pebble's default (a fatal log) away.
	popts := &pebble.Options{FS: o.FS, ReadOnly: true, Logger: slogLogger{slog.New(slog.DiscardHandler)},
		EventListener: &pebble.EventListener{DataCorruption: func(pebble.DataCorruptionInfo) {}}}
	db, err := pebble.Open(dir, popts)
	switch {
	case errors.Is(err, pebble.ErrDBDoesNotExist):
		return nil, fmt.Errorf("inspect %s: no Plaudit data directory here: %w", dir, err)
	case err != nil && lockHeld(err):
		return nil, fmt.Errorf("inspect %s (is a server running on it?): %w (%w)", dir, ErrLocked, err)
	case err != nil:
		return nil, fmt.Errorf("inspect %s: %w", dir, storageError(err))
	}
	defer db.Close()
	r.Format = db.FormatMajorVersion().String()
	if err := r.checkTables(db, o.FS, dir); err != nil {
		return nil, err
	}
	c, err := newCodec(o.MaxSnapshotSize)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if err := r.checkKeys(db, c, o); err != nil {
		return nil, err
	}
	return r, nil
}

func listFiles(fs vfs.FS, dir string) ([]FileReport, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", dir, err)
	}
	slices.Sort(names)
	var out []FileReport
	for _, n := range names {
		st, err := fs.Stat(fs.PathJoin(dir, n))
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", dir, err)
		}
		if st.IsDir() {
			continue
		}
		out = append(out, FileReport{Name: n, Kind: fileKind(n), Size: st.Size()})
	}
	return out, nil
}

func fileKind(name string) string {
	switch {
	case strings.HasSuffix(name, ".sst"):
		return "table"
	case strings.HasSuffix(name, ".log"):
		return "wal"
	case strings.HasPrefix(name, "MANIFEST-"):
		return "manifest"
	case strings.HasPrefix(name, "OPTIONS-"):
		return "options"
	case strings.HasPrefix(name, "marker."):
		return "marker"
	case name == "LOCK":
		return "lock"
	case name == ballastName:
		return "ballast"
	}
	return "other"
}

// checkTables validates the block checksums of every live table.
func (r *Report) checkTables(db *pebble.DB, fs vfs.FS, dir string) error {
	levels, err := db.SSTables()
	if err != nil {
		return fmt.Errorf("inspect %s: %w", dir, err)
	}
	ropts := func() sstable.ReaderOptions {
		o := &pebble.Options{}
		o.EnsureDefaults()
		return o.MakeReaderOptions()
	}()
	seen := map[uint64]bool{}
	for _, level := range levels {
		for _, t := range level {
			num := uint64(t.BackingSSTNum)
			if seen[num] {
				continue // virtual tables share a backing file
			}
			seen[num] = true
			name := fmt.Sprintf("%06d.sst", num)
			if err := validateTable(fs, fs.PathJoin(dir, name), ropts); err != nil {
				// The reader, opened outside the DB, names the file 000000.
				msg := strings.Replace(firstLine(err), "file 000000: ", "", 1)
				r.problem(Problem{File: name, Detail: fmt.Sprintf("%s (the table holds keys %s to %s)", msg, describeKey(t.Smallest.UserKey), describeKey(t.Largest.UserKey))})
			}
		}
	}
	return nil
}

func validateTable(fs vfs.FS, path string, ropts sstable.ReaderOptions) error {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		f.Close()
		return err
	}
	rd, err := sstable.NewReader(context.Background(), readable, ropts)
	if err != nil {
		readable.Close()
		return err
	}
	verr := rd.ValidateBlockChecksums()
	return errors.Join(verr, rd.Close())
}

// checkKeys reads every key in order: directory entries ("d/"), events
// and high-water marks ("e/"), older stores' high-water marks ("h/"),
// snapshots ("s/").
func (r *Report) checkKeys(db *pebble.DB, c *codec, o InspectOptions) error {
	it, err := db.NewIter(&pebble.IterOptions{})
	if err != nil {
		return fmt.Errorf("inspect %s: %w", r.Dir, storageError(err))
	}
	agents := map[string]*AgentReport{}
	agent := func(id string) *AgentReport {
		a := agents[id]
		if a == nil {
			a = &AgentReport{ID: id}
			agents[id] = a
		}
		return a
	}
	groups := map[string]*DirGroup{}
	var last []byte
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			break // reported below
		}
		last = append(last[:0], k...)
		// Every key is a tag, a slash and a name of at least one byte.
		if len(k) < 3 || k[1] != '/' {
			r.problem(Problem{Detail: "key outside the layout: " + describeKey(k)})
			continue
		}
		switch k[0] {
		case dirTag:
			p, _, _ := strings.Cut(string(k[2:]), "/")
			g := groups[p]
			if g == nil {
				g = &DirGroup{Prefix: p}
				groups[p] = g
			}
			g.Entries++
			g.Bytes += int64(len(k) + len(v))
		case eventTag:
			if id, ok := parseHighKey(k); ok {
				r.checkHighWater(agent(id), v)
				continue
			}
			r.checkEvent(k, v, agent, o)
		case highTag:
			r.checkHighWater(agent(string(k[2:])), v)
		case snapshotTag:
			id := string(k[2:])
			a := agent(id)
			state, seq, err := c.decode(k, v)
			if err != nil {
				r.problem(Problem{Agent: id, Detail: "snapshot: " + err.Error()})
				// The unverified seq keeps the checks of the log from
				// repeating this problem in other words.
				a.SnapshotSeq, _ = snapshotSeq(v)
				continue
			}
			if o.CheckState != nil {
				if err := o.CheckState(state); err != nil {
					r.problem(Problem{Agent: id, Detail: "snapshot state: " + err.Error()})
				}
			}
			a.SnapshotSeq, a.SnapshotBytes, a.StateBytes = seq, int64(len(v)), int64(len(state))
		default:
			r.problem(Problem{Detail: "key outside the layout: " + describeKey(k)})
		}
	}
	if err := it.Close(); err != nil { // Close returns the iterator's error
		p := Problem{Detail: "reading stopped: " + firstLine(storageError(err))}
		if last != nil {
			p.Detail = fmt.Sprintf("reading stopped after key %s: %s", describeKey(last), firstLine(storageError(err)))
		}
		var ce *CorruptionError
		if errors.As(storageError(err), &ce) {
			p.File = ce.File
		}
		if a, ok := agentOfKey(last); ok {
			p.Agent = a
		}
		r.problem(p)
	}
	for _, a := range agents {
		r.checkLog(a)
		r.Agents = append(r.Agents, *a)
	}
	slices.SortFunc(r.Agents, func(x, y AgentReport) int { return strings.Compare(x.ID, y.ID) })
	for _, g := range groups {
		r.Directory = append(r.Directory, *g)
	}
	slices.SortFunc(r.Directory, func(x, y DirGroup) int { return strings.Compare(x.Prefix, y.Prefix) })
	return nil
}

// checkEvent checks one event record "e/<agent>/<seq>" and its place after
// the agent's previous one.
func (r *Report) checkEvent(k, v []byte, agent func(string) *AgentReport, o InspectOptions) {
	id, seq, ok := parseEventKey(k)
	if !ok {
		r.problem(Problem{Detail: "malformed event key " + describeKey(k)})
		return
	}
	a := agent(id)
	if a.Events > 0 && seq != a.LastSeq+1 {
		r.problem(Problem{Agent: id, Detail: fmt.Sprintf("event %d: gap: expected %d", seq, a.LastSeq+1)})
	}
	if a.Events == 0 {
		a.FirstSeq = seq
	}
	a.Events++
	a.LastSeq = seq
	a.EventBytes += int64(len(v))
	payload, ok := checkRecord(k, v)
	if !ok {
		r.problem(Problem{Agent: id, Detail: fmt.Sprintf("event %d: checksum mismatch", seq)})
		return
	}
	if o.CheckEvent != nil {
		if err := o.CheckEvent(payload); err != nil {
			r.problem(Problem{Agent: id, Detail: fmt.Sprintf("event %d: %v", seq, err)})
		}
	}
}

// checkHighWater reads a high-water mark of agent a; of two (a store
// written before highKey may hold legacyHighKey too), the larger counts,
// as in Load.
func (r *Report) checkHighWater(a *AgentReport, v []byte) {
	if len(v) != seqLen {
		r.problem(Problem{Agent: a.ID, Detail: fmt.Sprintf("high-water mark of %d bytes", len(v))})
		return
	}
	a.HighWater = max(a.HighWater, binary.BigEndian.Uint64(v))
}

// checkLog checks what Load checks of the log as a whole: it starts right
// after the snapshot (or at 1) and reaches the high-water mark.
func (r *Report) checkLog(a *AgentReport) {
	if a.Events > 0 && a.FirstSeq != a.SnapshotSeq+1 {
		r.problem(Problem{Agent: a.ID, Detail: fmt.Sprintf("the log starts at event %d, after a snapshot of %d",
			a.FirstSeq, a.SnapshotSeq)})
	}
	end := max(a.LastSeq, a.SnapshotSeq)
	if end < a.HighWater {
		r.problem(Problem{Agent: a.ID, Detail: fmt.Sprintf("the log ends at event %d, but events to %d were acknowledged",
			end, a.HighWater)})
	}
}

// parseEventKey splits "e/<agent>/<seq>".
func parseEventKey(k []byte) (agent string, seq uint64, ok bool) {
	n := len(k) - seqLen - 1
	if n <= 2 || k[n] != '/' || bytes.IndexByte(k[2:n], '/') >= 0 {
		return "", 0, false
	}
	return string(k[2:n]), binary.BigEndian.Uint64(k[n+1:]), true
}

// agentOfKey is the agent an event, high-water or snapshot key belongs to.
func agentOfKey(k []byte) (string, bool) {
	if len(k) < 3 || k[1] != '/' {
		return "", false
	}
	switch k[0] {
	case eventTag:
		if a, ok := parseHighKey(k); ok {
			return a, true
		}
		a, _, ok := parseEventKey(k)
		return a, ok
	case highTag, snapshotTag:
		return string(k[2:]), true
	}
	return "", false
}

// describeKey renders a key for a person: event keys with their seq in
// decimal, others quoted.
func describeKey(k []byte) string {
	if len(k) == 0 {
		return `""`
	}
	if k[0] == eventTag {
		if a, seq, ok := parseEventKey(k); ok {
			return "e/" + a + "/" + strconv.FormatUint(seq, 10)
		}
	}
	return strconv.Quote(string(k))
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
