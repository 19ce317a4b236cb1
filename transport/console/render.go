package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/plaudit/plaudit/transport/console/chart"
)

// palette holds the variations' colours, in the order they are drawn:
// muted and told apart by people with the common colour-vision
// deficiencies (Okabe–Ito, darkened for white backgrounds).
var palette = []string{"#2f6db3", "#a86a0c", "#2a9d78", "#c0504d", "#7e5ba6", "#3e9fc2", "#b5689c", "#6b7a2a"}

func colour(i int) string { return palette[i%len(palette)] }

// dashes tell apart the curves of variations that share a colour: the
// first len(palette) are solid, the next dashed, the next dotted, and so
// on in turn.
var dashes = []string{"", "6 3", "1.5 2.5"}

func dash(i int) string { return dashes[i/len(palette)%len(dashes)] }

// fills tell apart the stacked bars (and legend swatches) of variations
// that share a colour, as dashes do the curves: solid, then striped, then
// dotted, each a pattern of the selections chart's (its id: hatchID).
var fills = []string{"", "stripes", "dots"}

func fill(i int) string { return fills[i/len(palette)%len(fills)] }

// hatchID is the id of variation i's pattern in the selections chart.
func hatchID(i int) string { return "sel-fill-" + strconv.Itoa(i) }

var funcs = template.FuncMap{
	"num":    num,
	"num3":   func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) },
	"numptr": func(v *float64) string { return numPtr(v, 3) },
	"pct": func(n, d int) string {
		if d == 0 {
			return "–"
		}
		return strconv.FormatFloat(100*float64(n)/float64(d), 'f', 0, 64) + " %"
	},
	"share": func(n, d int) float64 {
		if d == 0 {
			return 0
		}
		return math.Round(1000*float64(n)/float64(d)) / 10
	},
	"pctnum":  func(v float64) float64 { return math.Round(1000*v) / 10 },
	"pctspan": func(lo, hi float64) float64 { return max(math.Round(1000*(hi-lo))/10, 1) },
	"list":    func(s ...string) []string { return s },
	"pctf":    func(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + " %" },
	"when":    when,
	"whenptr": func(t *time.Time) string { return whenPtr(t) },
	"str": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"colour": colour,
	// mode names a selection mode as people say it: "weighted", "random".
	"mode": func(m string) string {
		return strings.ToLower(strings.TrimPrefix(m, "VARIATION_SELECTION_MODE_"))
	},
	"add":  func(a, b int) int { return a + b },
	"path": url.PathEscape,
	// clip keeps the first n characters of s, marking a cut with "…".
	"clip": func(n int, s string) string {
		if utf8.RuneCountInString(s) <= n {
			return s
		}
		return string([]rune(s)[:n]) + "…"
	},
	"op":     func(b byte) string { return string(b) },
	"deltaf": deltaf,
	"delta": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return deltaf(*v)
	},
	"hist": func(f chart.Frame, h histView, label string) histArgs {
		return histArgs{Frame: f, H: h, Label: label}
	},
}

// histArgs are the "histogram" part's arguments (parts.html).
type histArgs struct {
	Frame chart.Frame
	H     histView
	Label string
}

func num(v float64) string {
	if math.Abs(v) >= 1e6 || v != 0 && math.Abs(v) < 1e-3 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// deltaf formats a change with its sign to 3 decimals: a change of a
// rounding error (a re-weighted sum's last bit) reads as "0.000", not as
// 2.22e-16.
func deltaf(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	switch {
	case s == "-0.000":
		return "0.000"
	case v > 0 && s != "0.000":
		return "+" + s
	}
	return s
}

func numPtr(v *float64, _ int) string {
	if v == nil {
		return "–"
	}
	return num(*v)
}

func when(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func whenPtr(t *time.Time) string {
	if t == nil {
		return "–"
	}
	return when(*t)
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// parsePages parses each page template with the layout and the parts
// pages share (parts.html).
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(webFS, "web/templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if base == "layout" || base == "parts" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(webFS, "web/templates/layout.html", "web/templates/parts.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		pages[base] = t
	}
	return pages, nil
}

// render writes a page: the layout around the named page, with the
// session's CSRF token and who is signed in.
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, status int, page string, data map[string]any) {
	t := c.pages[page]
	if t == nil {
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	data["Prefix"] = Prefix
	data["Path"] = r.URL.Path
	if s != nil {
		data["CSRF"] = s.csrf
		if s.key != "" {
			data["Who"] = s.principal.Name
			data["Workspace"] = s.principal.Home
		}
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		c.cfg.Logger.Error("console template", "page", page, "err", err)
		http.Error(w, "page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
