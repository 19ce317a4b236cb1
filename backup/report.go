package backup

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/plaudit/plaudit/persist/pebblelog"
)

// WriteReport writes what Inspect found: tables of the files, agents and
// directory entries, then the problems (or that there are none); as one
// JSON object if asJSON.
func WriteReport(w io.Writer, r *pebblelog.Report, asJSON bool) error {
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
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", g.Prefix, g.Entries, g.Bytes)
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
