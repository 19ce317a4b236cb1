package backup

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteReport writes what InspectDataDir found: tables of the files,
// agents and directory entries, on a cluster member its streams, then the
// problems (or that there are none); as one JSON object if asJSON.
func WriteReport(w io.Writer, r *Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "data directory %s (pebble format %s)\n\n", r.Dir, r.Format)

	var total int64
	fmt.Fprintln(tw, "FILE\tKIND\tBYTES\t")
	for _, f := range r.Files {
		fmt.Fprintf(tw, "%s\t%s\t%d\t\n", f.Name, f.Kind, f.Size)
		total += f.Size
	}
	fmt.Fprintf(tw, "%d files\t\t%d\t\n\n", len(r.Files), total)

	var events, eventBytes, snapshots, snapshotBytes int64
	fmt.Fprintln(tw, "AGENT\tEVENTS\tEVENT BYTES\tLAST EVENT\tSNAPSHOT AT\tSNAPSHOT BYTES\tSTATE BYTES\t")
	for _, a := range r.Agents {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", a.ID, a.Events, a.EventBytes, max(a.LastSeq, a.SnapshotSeq),
			a.SnapshotSeq, a.SnapshotBytes, a.StateBytes)
		events += int64(a.Events)
		eventBytes += a.EventBytes
		snapshotBytes += a.SnapshotBytes
		if a.SnapshotBytes > 0 {
			snapshots++
		}
	}
	fmt.Fprintf(tw, "%d agents\t%d\t%d\t\t%d snapshots\t%d\t\t\n\n", len(r.Agents), events, eventBytes, snapshots, snapshotBytes)

	fmt.Fprintln(tw, "DIRECTORY\tENTRIES\tBYTES\t")
	for _, g := range r.Directory {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", strings.ToValidUTF8(g.Prefix, "\\xff"), g.Entries, g.Bytes)
	}
	if m := r.Cluster; m != nil {
		fmt.Fprintf(tw, "\ncluster member: agents' logs and snapshots are in JetStream (%s); the store above\n", m.Store)
		fmt.Fprintf(tw, "holds this node's mirror of the directory. This node's copies of the streams:\n\n")
		fmt.Fprintln(tw, "ACCOUNT\tSTREAM\tBLOCKS\tBYTES\tHOLDS\t")
		var bytes int64
		for _, s := range m.Streams {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t\n", s.Account, s.Name, s.Blocks, s.Bytes, s.Holds)
			bytes += s.Bytes
		}
		fmt.Fprintf(tw, "\t%d streams\t\t%d\t\t\n", len(m.Streams), bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Problems) == 0 {
		_, err := fmt.Fprintln(w, "\nok: every table block, event record and snapshot checksum holds")
		return err
	}
	fmt.Fprintf(w, "\nCORRUPT: %d problems\n", len(r.Problems))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	return nil
}
