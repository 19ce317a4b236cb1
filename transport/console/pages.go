package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plaudit/plaudit/transport/api"
	"github.com/plaudit/plaudit/transport/console/chart"
)

// tick is an axis label at a pixel position.
type tick struct {
	X, Y  float64
	Label string
	Align string // "" centred, "start" or "end" at the chart's edges
}

func unitTicks(f chart.Frame) []tick {
	var ts []tick
	for _, u := range []float64{0, 0.25, 0.5, 0.75, 1} {
		ts = append(ts, tick{X: f.X(u), Y: f.Base() + 16, Label: num(u)})
	}
	return ts
}

type agentRow struct {
	Agent    agentJSON
	Overview overviewJSON
}

func (c *Console) agentsPage(w http.ResponseWriter, r *http.Request, s *session) {
	var list items[agentJSON]
	if err := c.ask(s, api.ListAgents, api.Target{}, nil, &list); err != nil {
		c.fail(w, r, s, err)
		return
	}
	rows := make([]agentRow, len(list.Items))
	for i, a := range list.Items {
		rows[i].Agent = a
		if err := c.ask(s, api.AgentOverview, api.Target{Agent: a.ID}, map[string]string{"buckets": "1"}, &rows[i].Overview); err != nil {
			c.fail(w, r, s, err)
			return
		}
	}
	c.render(w, r, s, http.StatusOK, "agents", map[string]any{"Title": "Agents", "Agents": rows})
}

// posterior is one variation on the agent page: its Beta posterior, drawn.
type posterior struct {
	V            variationJSON
	Colour, Dash string // Dash: the curve's stroke-dasharray, "" for solid
	Mean, Lo, Hi float64
	Curve        chart.Curve
	RunsInWindow int
	// Leader marks the variation most likely to be the best.
	Leader bool
}

var (
	posteriorFrame  = chart.Frame{Width: 720, Height: 260, Left: 16, Right: 16, Top: 14, Bottom: 28}
	selectionsFrame = chart.Frame{Width: 720, Height: 160, Left: 16, Right: 16, Top: 10, Bottom: 28}
	histogramFrame  = chart.Frame{Width: 340, Height: 190, Left: 8, Right: 8, Top: 20, Bottom: 28}
	previewFrame    = chart.Frame{Width: 340, Height: 160, Left: 8, Right: 8, Top: 20, Bottom: 28}
)

// windows are the agent page's selection charts: buckets of a width.
var windows = map[string]struct {
	buckets, bucketS int
	label            string
}{
	"24h": {24, 3600, "last 24 hours, by hour"},
	"7d":  {28, 6 * 3600, "last 7 days, by 6 hours"},
	"30d": {30, 24 * 3600, "last 30 days, by day"},
}

type agentView struct {
	Agent       agentJSON
	Overview    overviewJSON
	Posteriors  []posterior // by mean, highest first
	HasProbBest bool
	Ticks       []tick
	Frame       chart.Frame
	SelFrame    chart.Frame
	Selections  []selectionSeries
	SelTicks    []tick
	Window      string
	WindowLabel string
	Poll        int // milliseconds
}

type selectionSeries struct {
	Name, Colour string
	// Pattern is "" (solid), "stripes" or "dots" (see fill), drawn as the
	// chart's pattern HatchID.
	Pattern, HatchID string
	Total            int
	Bars             []chart.Rect
}

// Fill is what the series' bars and swatch are filled with: its colour,
// or its pattern.
func (s selectionSeries) Fill() string {
	if s.Pattern == "" {
		return s.Colour
	}
	return "url(#" + s.HatchID + ")"
}

// agentData reads everything the agent page shows.
func (c *Console) agentData(s *session, id, window string) (agentView, error) {
	win, ok := windows[window]
	if !ok {
		window, win = "24h", windows["24h"]
	}
	v := agentView{Frame: posteriorFrame, SelFrame: selectionsFrame, Window: window, WindowLabel: win.label,
		Poll: int(c.cfg.Poll.Milliseconds()), Ticks: unitTicks(posteriorFrame)}
	t := api.Target{Agent: id}
	if err := c.ask(s, api.GetAgent, t, nil, &v.Agent); err != nil {
		return v, err
	}
	q := map[string]string{"buckets": strconv.Itoa(win.buckets), "bucket_s": strconv.Itoa(win.bucketS)}
	if err := c.ask(s, api.AgentOverview, t, q, &v.Overview); err != nil {
		return v, err
	}
	var vs items[variationJSON]
	if err := c.ask(s, api.ListVariations, t, nil, &vs); err != nil {
		return v, err
	}
	// Colours follow creation order, so a variation keeps its colour on
	// every chart however the means reorder.
	runs := map[string]int{}
	for _, it := range v.Overview.Selections.Items {
		for _, n := range it.Counts {
			runs[it.VariationID] += n
		}
	}
	// The mean, interval and probability of being best are the engine's
	// (the variations listing); only the curves are drawn here.
	leader, best := -1, 0.0
	for i, vr := range vs.Items {
		lo, hi := vr.Info.Interval[0], vr.Info.Interval[1]
		p := posterior{V: vr, Colour: colour(i), Dash: dash(i), Mean: vr.Info.Mean, Lo: lo, Hi: hi, RunsInWindow: runs[vr.ID]}
		v.Posteriors = append(v.Posteriors, p)
		if pb := vr.Info.ProbBest; pb != nil {
			v.HasProbBest = true
			if *pb > best {
				leader, best = i, *pb
			}
		}
	}
	if leader >= 0 && len(v.Posteriors) > 1 {
		v.Posteriors[leader].Leader = true
	}
	slices.SortStableFunc(v.Posteriors, func(a, b posterior) int { return cmp.Compare(b.Mean, a.Mean) })
	ds := make([]chart.Beta, len(v.Posteriors))
	for i, p := range v.Posteriors {
		ds[i] = chart.Beta{Alpha: p.V.Info.Alpha, Beta: p.V.Info.Beta}
	}
	for i, cv := range chart.Densities(posteriorFrame, ds, 160) {
		v.Posteriors[i].Curve = cv
	}

	series := make([][]int, len(v.Overview.Selections.Items))
	for i, it := range v.Overview.Selections.Items {
		series[i] = it.Counts
	}
	for i, bars := range chart.Stacked(selectionsFrame, series, 2) {
		it := v.Overview.Selections.Items[i]
		v.Selections = append(v.Selections, selectionSeries{Name: it.Name, Colour: colour(i), Pattern: fill(i), HatchID: hatchID(i),
			Total: runs[it.VariationID], Bars: bars})
	}
	start, width := v.Overview.Selections.Start, time.Duration(v.Overview.Selections.BucketS)*time.Second
	for i, b := range []int{0, win.buckets / 2, win.buckets} {
		at := start.Add(time.Duration(b) * width)
		label := at.UTC().Format("Jan 2 15:04")
		v.SelTicks = append(v.SelTicks, tick{X: selectionsFrame.X(float64(b) / float64(win.buckets)), Y: selectionsFrame.Base() + 16,
			Label: label, Align: []string{"start", "", "end"}[i]})
	}
	return v, nil
}

func (c *Console) agentPage(w http.ResponseWriter, r *http.Request, s *session) {
	v, err := c.agentData(s, r.PathValue("agent"), r.URL.Query().Get("window"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "agent", map[string]any{"Title": v.Agent.Name, "A": v})
}

// agentLive answers the agent's event sequence as plain text: the agent
// page polls it and redraws when it changes.
func (c *Console) agentLive(w http.ResponseWriter, r *http.Request, s *session) {
	var o overviewJSON
	err := c.ask(s, api.AgentOverview, api.Target{Agent: r.PathValue("agent")}, map[string]string{"buckets": "1", "rewards": "false"}, &o)
	if err != nil {
		status := http.StatusInternalServerError
		if e := (*errService)(nil); asErr(err, &e) {
			status = e.status
		}
		http.Error(w, "unavailable", status)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(strconv.FormatUint(o.Seq, 10)))
}

// versionColumn is one release on the version rewards page.
type versionColumn struct {
	Summary summaryJSON
	Hist    histView
}

func (c *Console) versionsPage(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("agent")
	t := api.Target{Agent: id}
	q := r.URL.Query()
	var ag agentJSON
	var ov overviewJSON
	if err := c.ask(s, api.GetAgent, t, nil, &ag); err != nil {
		c.fail(w, r, s, err)
		return
	}
	if err := c.ask(s, api.AgentOverview, t, map[string]string{"buckets": "1", "rewards": "false"}, &ov); err != nil {
		c.fail(w, r, s, err)
		return
	}
	var labels []string
	for _, v := range ov.Versions {
		if v.Version != nil {
			labels = append(labels, *v.Version)
		}
	}
	objVersion := ov.ObjectiveVersion
	if n, err := strconv.Atoi(q.Get("objective_version")); err == nil && n >= 0 && n <= ov.ObjectiveVersion {
		objVersion = n
	}
	pick := func(name string, fallback int) string {
		if v := q.Get(name); slices.Contains(labels, v) {
			return v
		}
		if fallback >= 0 && fallback < len(labels) {
			return labels[fallback]
		}
		return ""
	}
	chosen := []string{pick("v", len(labels)-1), pick("compare", len(labels)-2)}
	var cols []versionColumn
	for _, label := range chosen {
		if label == "" || len(cols) == 1 && label == cols[0].Summary.Version {
			continue
		}
		var col versionColumn
		query := map[string]string{"objective_version": strconv.Itoa(objVersion), "limit": strconv.Itoa(lowestShown)}
		if err := c.ask(s, api.VersionRewards, api.Target{Agent: id, Version: label}, query, &col.Summary); err != nil {
			c.fail(w, r, s, err)
			return
		}
		cols = append(cols, col)
	}
	hs := make([]histogramJSON, len(cols))
	for i := range cols {
		hs[i] = cols[i].Summary.Histogram
	}
	for i, h := range drawHistograms(histogramFrame, hs) {
		cols[i].Hist = h
	}
	objectives := make([]int, ov.ObjectiveVersion+1)
	for i := range objectives {
		objectives[i] = i
	}
	c.render(w, r, s, http.StatusOK, "versions", map[string]any{"Title": "Rewards by version · " + ag.Name, "Agent": ag,
		"Labels": labels, "Chosen": chosen, "Columns": cols, "Objectives": objectives, "ObjectiveVersion": objVersion,
		"Current": ov.ObjectiveVersion, "Frame": histogramFrame})
}

// lowestShown is how many of the lowest-scoring runs a page lists.
const lowestShown = 10

type termRow struct {
	T            termJSON
	Contribution string
}

type signalRow struct {
	S       signalJSON
	Subject string
	verdict
}

type evidenceRow struct {
	E      evidenceJSON
	Detail string
	verdict
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request, s *session) {
	id, runID := r.PathValue("agent"), r.PathValue("run")
	t := api.Target{Agent: id, Run: runID}
	var (
		ag  agentJSON
		run runJSON
		rw  rewardJSON
		sig items[signalJSON]
		ev  items[evidenceJSON]
		obj objectiveJSON
		def definitionJSON
	)
	var q map[string]string
	if v := r.URL.Query().Get("objective_version"); v != "" {
		q = map[string]string{"objective_version": v}
	}
	for _, step := range []func() error{
		func() error { return c.ask(s, api.GetAgent, api.Target{Agent: id}, nil, &ag) },
		func() error { return c.ask(s, api.GetRun, t, nil, &run) },
		func() error { return c.ask(s, api.GetReward, t, q, &rw) },
		func() error { return c.ask(s, api.ListRunSignals, t, nil, &sig) },
		func() error { return c.ask(s, api.ListEvidence, api.Target{Run: run.ID}, nil, &ev) },
		func() error {
			return c.ask(s, api.GetObjectiveVersion, api.Target{Agent: id, Version: strconv.Itoa(rw.ObjectiveVersion)}, nil, &obj)
		},
		func() error { return json.Unmarshal(obj.Definition, &def) },
	} {
		if err := step(); err != nil {
			c.fail(w, r, s, err)
			return
		}
	}
	terms := make([]termRow, len(rw.Terms))
	for i, tr := range rw.Terms {
		terms[i].T = tr
		if p, ok := contribution(rw.Terms, i, def.Bounds); ok {
			terms[i].Contribution = "+" + num(p)
			if p < 0 {
				terms[i].Contribution = num(p)
			}
		}
	}
	signals := make([]signalRow, len(sig.Items))
	for i, sg := range sig.Items {
		subject := "run"
		switch {
		case sg.Object != "":
			subject = "object " + sg.Object
		case sg.SessionID != "":
			subject = "session " + sg.SessionID
		}
		signals[i] = signalRow{S: sg, Subject: subject, verdict: explain(def, run.FinishedAt, sg.Kind, sg.OccurredAt, sg.ReceivedAt)}
	}
	evidence := make([]evidenceRow, len(ev.Items))
	for i, e := range ev.Items {
		evidence[i].E = e
		if pretty, err := indentJSON(e.Detail); err == nil && pretty != "{}" {
			evidence[i].Detail = pretty
		}
		// A standing report with a value is a signal of kind = scorer (at
		// its updated_at); feedback and judged rewards are listed only
		// (feedback's own signal is among the signals above).
		switch {
		case e.Kind == "feedback" || e.Kind == "model_judge" || e.Kind == "check":
			evidence[i].verdict = verdict{"listed", "evidence listed with the run; " + evidenceNote(e.Kind)}
		case e.Value == nil:
			evidence[i].verdict = verdict{verdictUnread, "a report without a value (a choice) is no signal"}
		case e.Scorer != nil && e.UpdatedAt != nil:
			evidence[i].verdict = explain(def, run.FinishedAt, *e.Scorer, *e.UpdatedAt, *e.UpdatedAt)
		}
	}
	var guarded *guardJSON
	for i := range rw.Guards {
		if rw.Guards[i].Matched {
			guarded = &rw.Guards[i]
			break
		}
	}
	c.render(w, r, s, http.StatusOK, "run", map[string]any{"Title": "Run " + run.ID, "Agent": ag, "Run": run, "Reward": rw,
		"Terms": terms, "Signals": signals, "Evidence": evidence, "Def": def, "Guarded": guarded})
}

func evidenceNote(kind string) string {
	switch kind {
	case "feedback":
		return "its score also arrives as a signal of kind feedback"
	}
	return "a judged reward appends its own judge.* signals when scored"
}

type objectiveRow struct {
	O      objectiveJSON
	Pretty string
}

func (c *Console) objectivePage(w http.ResponseWriter, r *http.Request, s *session) {
	if t := r.URL.Query().Get("draft"); t != "" {
		c.draftPage(w, r, s, t)
		return
	}
	data, err := c.objectiveData(s, r, r.PathValue("agent"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "objective", data)
}

// objectiveData reads the objective page: the versions, the diff the
// query asks for, and the draft form prefilled with the current definition.
func (c *Console) objectiveData(s *session, r *http.Request, id string) (map[string]any, error) {
	var ag agentJSON
	var cur objectiveJSON
	var ov overviewJSON
	if err := c.ask(s, api.GetAgent, api.Target{Agent: id}, nil, &ag); err != nil {
		return nil, err
	}
	if err := c.ask(s, api.GetObjective, api.Target{Agent: id}, nil, &cur); err != nil {
		return nil, err
	}
	if err := c.ask(s, api.AgentOverview, api.Target{Agent: id}, map[string]string{"buckets": "1", "rewards": "false"}, &ov); err != nil {
		return nil, err
	}
	versions := make([]objectiveRow, cur.Version+1)
	for v := range versions {
		o := &versions[v].O
		if err := c.ask(s, api.GetObjectiveVersion, api.Target{Agent: id, Version: strconv.Itoa(v)}, nil, o); err != nil {
			return nil, err
		}
		versions[v].Pretty, _ = indentJSON(o.Definition)
	}
	pick := func(name string, def int) int {
		if n, err := strconv.Atoi(r.URL.Query().Get(name)); err == nil && n >= 0 && n <= cur.Version {
			return n
		}
		return def
	}
	b := pick("b", cur.Version)
	a := pick("a", max(b-1, 0))
	var labels []string
	for _, v := range ov.Versions {
		if v.Version != nil {
			labels = append(labels, *v.Version)
		}
	}
	return map[string]any{"Title": "Objective · " + ag.Name, "Agent": ag, "Versions": versions, "A": a, "B": b,
		"Diff": lineDiff(versions[a].Pretty, versions[b].Pretty), "Current": cur.Version, "Labels": labels,
		"Draft": draftForm{Definition: versions[cur.Version].Pretty}, "PFrame": previewFrame}, nil
}

func (c *Console) tasksPage(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.URL.Query().Get("id")
	data := map[string]any{"Title": "Judged answers", "ID": id}
	if id == "" {
		var tasks taskListJSON
		if err := c.ask(s, api.ListTasks, api.Target{}, nil, &tasks); err != nil {
			c.fail(w, r, s, err)
			return
		}
		data["Tasks"] = tasks.Items
	} else {
		var task taskJSON
		var cal calibrationJSON
		var sum taskRewardsJSON
		err := c.ask(s, api.GetTask, api.Target{Task: id}, nil, &task)
		if err == nil {
			err = c.ask(s, api.TaskCalibration, api.Target{Task: id}, nil, &cal)
		}
		if err == nil {
			err = c.ask(s, api.TaskRewardSummary, api.Target{Task: id}, nil, &sum)
		}
		if e := (*errService)(nil); asErr(err, &e) && e.status == http.StatusNotFound {
			data["NotFound"] = true
		} else if err != nil {
			c.fail(w, r, s, err)
			return
		} else {
			type version struct {
				Version, Pretty string
				Seq             int
				CreatedAt       time.Time
				Current         bool
			}
			var vs []version
			for _, it := range task.Items {
				pretty, _ := indentJSON(it.Task)
				vs = append(vs, version{it.Version, pretty, it.Seq, it.CreatedAt, it.Version == task.Current})
			}
			slices.Reverse(vs) // newest first
			data["Task"], data["Versions"], data["Calibration"] = task, vs, cal
			data["Rewards"], data["Frame"] = judgedColumns(sum, task.Current), histogramFrame
		}
	}
	c.render(w, r, s, http.StatusOK, "tasks", data)
}

// judgedColumn is one task version's reward distribution, as the summary
// answers it, with its histogram drawn.
type judgedColumn struct {
	Version                          string
	Seq                              int
	Current                          bool
	Rewards, Scored, Pending, Failed int
	Mean                             *float64
	Flags                            flagCounts
	Hist                             histView
}

// judgedColumns draws the summary's versions newest first, their
// histograms on one vertical scale so that the bars compare.
func judgedColumns(sum taskRewardsJSON, current string) []judgedColumn {
	hs := make([]histogramJSON, len(sum.Items))
	cols := make([]judgedColumn, len(sum.Items))
	for i, it := range sum.Items {
		hs[i] = histogramJSON{Bounds: it.Histogram.Bounds, Matured: it.Histogram.Counts}
		cols[i] = judgedColumn{Version: it.TaskVersion, Seq: it.Seq, Current: it.TaskVersion == current,
			Rewards: it.Rewards, Scored: it.Scored, Pending: it.Pending, Failed: it.Failed, Mean: it.Mean, Flags: it.Flags}
	}
	for i, h := range drawHistograms(histogramFrame, hs) {
		h.Counted = "scored rewards"
		cols[i].Hist = h
	}
	slices.Reverse(cols)
	return cols
}

// indentJSON indents JSON the API wrote for a page to show, with the
// escapes the API writes for '<', '>' and '&' (\u003c…) turned back into
// the characters: the page's template escapes them for HTML itself.
func indentJSON(b []byte) (string, error) {
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		return "", err
	}
	in := pretty.Bytes()
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		if in[i] != '\\' || i+1 == len(in) {
			out = append(out, in[i])
			continue
		}
		if in[i+1] == 'u' && i+6 <= len(in) {
			switch strings.ToLower(string(in[i+2 : i+6])) {
			case "003c", "003e", "0026":
				n, _ := strconv.ParseUint(string(in[i+2:i+6]), 16, 8)
				out = append(out, byte(n))
				i += 5
				continue
			}
		}
		out = append(out, in[i], in[i+1]) // an escape, whole: "\\\\" is one backslash
		i++
	}
	return string(out), nil
}
