package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTables writes a table per family, then recovery and memory, as
// Markdown: each row's own figures, then its baseline and the ratios to
// it at the same concurrency (and to the same workload built another
// way, where there is one).
func (r *Report) WriteTables(w io.Writer) error {
	fmt.Fprintf(w, "%s, %d CPUs (%s), %s, %s; %s.\n", r.Date.Format("2006-01-02 15:04 MST"),
		r.Machine.CPUs, r.Machine.Model, r.Machine.Go, r.Machine.OSArch, r.Mode)
	var fams []string
	byFam := map[string][]Row{}
	for _, row := range r.Rows {
		if _, ok := byFam[row.Family]; !ok {
			fams = append(fams, row.Family)
		}
		byFam[row.Family] = append(byFam[row.Family], row)
	}
	for _, f := range fams {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
		fmt.Fprintf(tw, "| %s\tc\tops/s\tp50\tp99\tp99.9\tmax\tcpu/op\tof\terr\tbase\tp50 ÷ base\tp99 ÷ base\tops/s ÷ base\tcpu ÷ base\tops/s ÷ vs\t\n", f)
		fmt.Fprintln(tw, "|"+strings.Repeat("---\t", 16))
		for _, row := range byFam[f] {
			fmt.Fprintf(tw, "| %s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				row.Name, row.C, row.OpsPerSec, micros(row.P50), micros(row.P99), micros(row.P999), micros(row.Max),
				micros(row.CPUPerOp()), row.Process, row.Errors, row.Base,
				ratio(row.P50Ratio), ratio(row.P99Ratio), ratio(row.OpsRatio), ratio(row.CPURatio), vsRatio(row))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, row := range byFam[f] {
			if row.LateP50 > 0 {
				fmt.Fprintf(w, "\n%s c=%d: the harness sent late (after the due time) p50 %s, p99 %s\n",
					row.Name, row.C, micros(row.LateP50), micros(row.LateP99))
			}
			if row.Unsent > 0 {
				fmt.Fprintf(w, "\n%s c=%d: the rate was not reached: %d operations fell due and were not sent by the end; the latencies are of those sent\n",
					row.Name, row.C, row.Unsent)
			}
		}
	}
	if len(r.Recovery) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| recovery | events | agents | start → /healthz 200 | start → every agent answered | RSS after | RSS ÷ event | RSS empty | (after − empty) ÷ event |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		for _, rc := range r.Recovery {
			fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %.0f B | %s | %.0f B |\n", rc.Name, rc.Events, rc.Agents,
				rc.Healthz.Round(time.Millisecond), rc.AllAgents.Round(time.Millisecond), mib(rc.RSS),
				float64(rc.RSS)/float64(rc.Events), mib(rc.RSSEmpty), rc.PerEvent())
		}
	}
	if len(r.Memory) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| memory | items | RSS before → after | RSS ÷ item | live heap before → after | heap ÷ item |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		for _, m := range r.Memory {
			fmt.Fprintf(w, "| %s | %d | %s → %s | %.0f B | %s → %s | %.0f B |\n", m.Name, m.Items,
				mib(m.RSSBefore), mib(m.RSSAfter), m.RSSPerItem(), mib(m.HeapBefore), mib(m.HeapAfter), m.HeapPerItem())
		}
	}
	fmt.Fprintln(w)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	for _, s := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", s)
	}
	fmt.Fprintf(w, "cpu/op is the CPU of the process named in \"of\" (server: the child plaudit; hello: bench-hello; bench: the load generator's own); ratios are within this run; %v in all.\n",
		r.Elapsed.Round(100*time.Millisecond))
	return nil
}

func vsRatio(row Row) string {
	if row.Vs == "" {
		return ""
	}
	return ratio(row.VsOpsRatio) + " " + strings.TrimPrefix(row.Vs, "redis-")
}

func ratio(x float64) string {
	if x == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", x)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// micros formats d in microseconds, the unit of every latency here.
func micros(d time.Duration) string {
	if d == 0 {
		return ""
	}
	us := float64(d) / float64(time.Microsecond)
	if us < 100 {
		return fmt.Sprintf("%.1fµs", us)
	}
	return fmt.Sprintf("%.0fµs", us)
}
