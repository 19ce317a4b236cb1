package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// docsScreenshots is where the browser test leaves its pictures of the
// console when PLAUDIT_SCREENSHOTS=1 (`make screenshots`; the README links
// them); otherwise they go to a temporary directory, so a test run leaves
// the working tree as it was.
const docsScreenshots = "../../docs/console"

// chromium finds the browser: $PLAUDIT_CHROMIUM, else Debian's chromium.
func chromium() string {
	if p := os.Getenv("PLAUDIT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

type curveInfo struct {
	Name   string  `json:"name"`
	Mean   float64 `json:"mean"`
	PeakX  float64 `json:"peakX"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
	Fill   string  `json:"fill"`
}

// TestConsoleInBrowser drives the console in headless Chromium: sign in,
// the agent's posterior chart (one curve per variation, by mean, drawn),
// a live update when feedback arrives, the lowest run and its evidence,
// and a draft objective tried from the objective page.
// Without Chromium it fails, unless PLAUDIT_SKIP_BROWSER=1 says to skip.
func TestConsoleInBrowser(t *testing.T) {
	path := chromium()
	if path == "" {
		if os.Getenv("PLAUDIT_SKIP_BROWSER") == "1" {
			t.Skip("no Chromium, and PLAUDIT_SKIP_BROWSER=1")
		}
		t.Fatal("Chromium not found: apt-get install -y chromium (or set PLAUDIT_CHROMIUM), or PLAUDIT_SKIP_BROWSER=1 to skip this test locally")
	}
	e := start(t)
	s := e.seed()
	screenshots := t.TempDir()
	if os.Getenv("PLAUDIT_SCREENSHOTS") == "1" {
		screenshots = docsScreenshots
	}
	if err := os.MkdirAll(screenshots, 0o755); err != nil {
		t.Fatal(err)
	}

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1200, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			buf, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(screenshots, name+".png"), buf, 0o644)
		})
	}
	// shotOf takes a picture of one element.
	shotOf := func(name, sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			buf, err := chromedp.Screenshot(chromedp.CSS(sel))(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(screenshots, name+".png"), buf, 0o644)
		})
	}
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		// The live refresh replaces the page's figures: a node found a
		// moment before may be gone when its text is asked for, and is
		// found again.
		var err error
		for range 5 {
			var s string
			if s, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel))); err == nil {
				return s
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("text of %s: %v", sel, err)
		return ""
	}

	// Sign in: the agents page sends to the form, which sends back.
	run("sign in", chromedp.Navigate(e.base+"/ui/agents"),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
		shot("signin"),
		chromedp.SendKeys(chromedp.CSS(`#key`), adminKey),
		chromedp.Submit(chromedp.CSS(`#key`)),
		chromedp.WaitVisible(chromedp.CSS(`#agents`)),
		shot("agents"))

	// The agent's posteriors: one drawn curve per variation, highest mean
	// first, and the peaks in the same order left to right reversed.
	run("agent page", chromedp.Click(chromedp.CSS(`#agents a`)),
		chromedp.WaitVisible(chromedp.CSS(`#posterior`)), shot("agent"))
	curves, err := chromedp.Run(ctx, chromedp.Evaluate[[]curveInfo](`Array.from(document.querySelectorAll('#posterior path.curve')).map(function (p) {
			var n = p.getTotalLength(), best = null;
			for (var i = 0; i <= 400; i++) { var pt = p.getPointAtLength(n * i / 400); if (!best || pt.y < best.y) { best = pt; } }
			var bb = p.getBBox();
			return {name: p.dataset.name, mean: parseFloat(p.dataset.mean), peakX: best.x, width: bb.width, height: bb.height,
				fill: getComputedStyle(p).fill};
		})`))
	if err != nil {
		t.Fatalf("curves: %v", err)
	}
	var names []string
	for i, c := range curves {
		names = append(names, c.Name)
		if c.Width < 500 || c.Height < 50 || c.Fill != "none" {
			t.Errorf("curve %s drawn %.0f×%.0f, fill %q: not a styled curve across the chart", c.Name, c.Width, c.Height, c.Fill)
		}
		if i > 0 && !(c.Mean < curves[i-1].Mean && c.PeakX < curves[i-1].PeakX) {
			t.Errorf("curve %s (mean %.3f, peak x %.0f) after %s (mean %.3f, peak x %.0f): not in order of mean",
				c.Name, c.Mean, c.PeakX, curves[i-1].Name, curves[i-1].Mean, curves[i-1].PeakX)
		}
	}
	if !slices.Equal(names, s.byMean) {
		t.Errorf("curves %v, want %v", names, s.byMean)
	}

	// Live: feedback sent through the API shows up without a reload.
	before := text(`#feedback-count`)
	e.api(adminKey, 200, "POST", "/v1/workspaces/default/objectives/"+s.lowest+"/feedback",
		map[string]any{"metadata": map[string]any{}, "data": map[string]any{"score": -1}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if now := text(`#feedback-count`); now != before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent page did not update after feedback: still %s", before)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The lowest run of release 2, and its evidence.
	run("lowest run", chromedp.Navigate(e.base+"/ui/agents/"+s.agent+"/versions?v=2&compare=1"),
		chromedp.WaitVisible(chromedp.CSS(`svg.histogram`)),
		shot("versions"),
		chromedp.Click(chromedp.CSS(`section.version table.lowest a`)),
		chromedp.WaitVisible(chromedp.CSS(`#evidence`)),
		shot("run"))
	evidence, signals := text(`#evidence`), text(`#signals`)
	url, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(url, "/runs/"+s.lowest) {
		t.Errorf("the first lowest run is %s, want %s", url, s.lowest)
	}
	for _, want := range []string{"ci.tests", "external", "feedback"} {
		if !strings.Contains(evidence, want) {
			t.Errorf("evidence lacks %q:\n%s", want, evidence)
		}
	}
	if !strings.Contains(signals, "late") || !strings.Contains(signals, "after the horizon closed") {
		t.Errorf("the late rating is not explained:\n%s", signals)
	}

	run("objective", chromedp.Navigate(e.base+"/ui/agents/"+s.agent+"/objective"),
		chromedp.WaitVisible(chromedp.CSS(`#diff .add`)), shot("objective"))

	// Try a draft that re-weights the terms: the panel shows both
	// summaries as the service answers them, and the runs that moved.
	want := e.api(adminKey, 200, "POST", "/api/v1/agents/"+s.agent+"/objective/preview",
		map[string]any{"definition": json.RawMessage(reweighted), "limit": 10})
	run("try a draft", chromedp.SetValue(chromedp.CSS(`#definition`), reweighted),
		chromedp.Click(chromedp.CSS(`#draft-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#preview`)),
		chromedp.ScrollIntoView(chromedp.CSS(`#try-draft`)),
		shotOf("preview", `#try-draft`))
	for _, side := range []string{"current", "draft"} {
		sum := want[side].(map[string]any)
		for _, f := range []struct{ field, want string }{
			{"mean", num(sum["mean"].(float64))}, {"runs", fmt.Sprint(sum["runs"])}, {"matured", fmt.Sprint(sum["matured"])},
		} {
			if got := text(`#preview [data-side="` + side + `"] [data-field="` + f.field + `"]`); got != f.want {
				t.Errorf("preview, %s %s: shows %q, the service answered %q", side, f.field, got, f.want)
			}
		}
		bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#preview [data-side="`+side+`"] svg.histogram rect.bar').length`))
		if err != nil || bars == 0 {
			t.Errorf("preview, %s: %d histogram bars drawn (%v)", side, bars, err)
		}
	}
	moved := want["moved"].([]any)[0].(map[string]any)
	if got, d := text(`#moved tbody tr:first-child td:nth-child(4)`), moved["delta"].(float64); got != fmt.Sprintf("%+.3f", d) {
		t.Errorf("the run that moved most shows a change of %q, the service answered %v", got, moved["delta"])
	}
	run("a moved run", chromedp.Click(chromedp.CSS(`#moved tbody tr:first-child a`)), chromedp.WaitVisible(chromedp.CSS(`#evidence`)))
	if url, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.Contains(url, "/runs/"+moved["run_id"].(string)) {
		t.Errorf("the moved run's link leads to %s (%v), want run %s", url, err, moved["run_id"])
	}
	// Back shows the draft's preview again: the form's answer was a
	// redirect to a page, not a page the browser must post again for.
	// (Asked with script: chromedp's queries lose track of a document
	// the browser restores from its back-forward cache.)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`history.back(), 0`)); err != nil {
		t.Fatalf("back: %v", err)
	}
	var back struct{ URL, Mean string }
	for range 100 {
		back, _ = chromedp.Run(ctx, chromedp.Evaluate[struct{ URL, Mean string }](`({URL: location.href,
			Mean: (document.querySelector('#preview [data-side="draft"] [data-field="mean"]') || {}).textContent || ""})`))
		if back.Mean != "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if mean := num(want["draft"].(map[string]any)["mean"].(float64)); !strings.Contains(back.URL, "/objective?draft=") || back.Mean != mean {
		t.Errorf("back from the moved run: %s showing a draft mean of %q, want the draft's page showing %q", back.URL, back.Mean, mean)
	}

	// Judged answers: per task version, the mean and the bars of the
	// summary the API answers.
	e.seedJudged()
	judged := e.api(adminKey, 200, "GET", "/v1/tasks/acme%2Frefund/rewards/summary", nil)
	// The nav's "Judged answers" lists the tasks; a task's link opens its page.
	// (A page loaded afresh first: chromedp's queries lost the document
	// that Back restored above.)
	run("judged answers", chromedp.Navigate(e.base+"/ui/agents"), chromedp.Click(chromedp.CSS(`nav a[href="/ui/tasks"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tasks`)), shot("tasks"),
		chromedp.Click(chromedp.CSS(`#tasks tbody tr:first-child a`)),
		chromedp.WaitVisible(chromedp.CSS(`section.judged svg.histogram`)), shot("judged"))
	for _, it := range judged["items"].([]any) {
		v := it.(map[string]any)
		col := `section.judged[data-task-version="` + v["task_version"].(string) + `"]`
		if got := text(col + ` [data-mean]`); got != num(v["mean"].(float64)) {
			t.Errorf("%s: mean %q, the service answered %v", col, got, v["mean"])
		}
		bins := 0
		for _, n := range v["histogram"].(map[string]any)["counts"].([]any) {
			if n.(float64) > 0 {
				bins++
			}
		}
		bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+col+` svg.histogram rect.bar').length`))
		if err != nil || bars != bins {
			t.Errorf("%s: %d bars drawn (%v), want one per non-empty bin: %d", col, bars, err, bins)
		}
		for f := range v["flags"].(map[string]any) {
			if got := text(col + ` [data-flag="` + f + `"]`); !strings.HasPrefix(got, f) {
				t.Errorf("%s: flag %s shows %q", col, f, got)
			}
		}
	}

	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("the browser test ran out of time")
	}
}
