package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/plaudit/plaudit/cluster"
	"github.com/plaudit/plaudit/persist/jslog"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// MemberReport is what a cluster member's data directory holds besides
// its Pebble store (which there keeps the node's mirror of the cluster's
// directory, and no agent logs): the embedded NATS server's JetStream
// store, in which the node keeps its copies of the cluster's streams.
type MemberReport struct {
	Store   string         `json:"jetstream_store"`
	Streams []StreamReport `json:"streams"`
}

// StreamReport is one stream's copy in a member's JetStream store.
type StreamReport struct {
	Account string `json:"account"`
	Name    string `json:"name"`
	Holds   string `json:"holds"`  // what Plaudit keeps in it
	Blocks  int    `json:"blocks"` // message block files
	Bytes   int64  `json:"bytes"`  // every file of the stream's directory
}

// Report is what `plaudit inspect` shows of a data directory: its store
// (Inspect), and on a cluster member its JetStream store (InspectMember).
type Report struct {
	*pebblelog.Report
	Cluster *MemberReport `json:"cluster,omitempty"`
}

// InspectDataDir inspects the stopped data directory dir, a single
// server's or a cluster member's.
func InspectDataDir(dir string) (*Report, error) {
	r, err := Inspect(dir)
	if err != nil {
		return nil, err
	}
	m, err := InspectMember(dir)
	if err != nil {
		return nil, err
	}
	return &Report{Report: r, Cluster: m}, nil
}

// jetStreamDir is where a cluster member's embedded server keeps
// JetStream, under its data directory (nats-server adds "jetstream" to
// the store directory Plaudit gives it).
func jetStreamDir(dataDir string) string { return filepath.Join(dataDir, "jetstream", "jetstream") }

// InspectMember reports the JetStream store of the cluster member whose
// data directory is dataDir, or nil if dataDir has none (a single server,
// or a node on an external NATS). It reads file sizes only: JetStream
// checks its own files when the node starts.
func InspectMember(dataDir string) (*MemberReport, error) {
	root := jetStreamDir(dataDir)
	accounts, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", root, err)
	}
	r := &MemberReport{Store: root, Streams: []StreamReport{}}
	for _, acc := range accounts {
		streams, err := os.ReadDir(filepath.Join(root, acc.Name(), "streams"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the system account's meta group has no streams
		}
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", root, err)
		}
		for _, st := range streams {
			sr := StreamReport{Account: acc.Name(), Name: st.Name(), Holds: streamHolds(st.Name())}
			err := filepath.WalkDir(filepath.Join(root, acc.Name(), "streams", st.Name()),
				func(path string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					info, err := d.Info()
					if err != nil {
						return err
					}
					sr.Bytes += info.Size()
					if strings.HasSuffix(d.Name(), ".blk") {
						sr.Blocks++
					}
					return nil
				})
			if err != nil {
				return nil, fmt.Errorf("inspect %s: %w", root, err)
			}
			r.Streams = append(r.Streams, sr)
		}
	}
	sort.Slice(r.Streams, func(i, j int) bool { return streamOrder(r.Streams[i]) < streamOrder(r.Streams[j]) })
	return r, nil
}

// streamHolds says what Plaudit keeps in the stream called name.
func streamHolds(name string) string {
	if p, ok := strings.CutPrefix(name, "PLAUDIT_LOG_"); ok && jslog.StreamName(atoi(p)) == name {
		return "partition " + p + "'s event log"
	}
	switch name {
	case jslog.DirStream:
		return "the directory: workspaces, keys, indexes, idempotency records"
	case cluster.LeaseStream:
		return "partition leases and node heartbeats"
	case "KV_" + cluster.MetaBucket:
		return "the cluster's name, partition count and lease TTL"
	case "OBJ_" + jslog.SnapshotBucket:
		return "agent snapshots"
	}
	return "not Plaudit's"
}

// streamOrder sorts partitions' logs by number, after the other streams.
func streamOrder(s StreamReport) string {
	if p, ok := strings.CutPrefix(s.Name, "PLAUDIT_LOG_"); ok {
		return fmt.Sprintf("%s\x01%06d", s.Account, atoi(p))
	}
	return s.Account + "\x00" + s.Name
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
