// Package console is Plaudit's web console: server-rendered pages under
// /ui/ that show what the service answers — agents, the variations'
// posteriors, reward distributions, the lowest-scoring runs with their
// evidence, objective versions and judged answers — as tables and SVG
// charts drawn in Go (package chart).
//
// It is a door like HTTP and NATS: every figure comes from api.Service's
// Handle with the signed-in key's principal, so the service's tenancy
// decides what a key sees, and the console never reaches the actors, the
// engine's state or another door. It is an http.Handler; the HTTP door
// serves it under /ui/ (httpdoor.Config.UI) without knowing this package.
//
// Sign-in takes an API key and keeps it in a server-side session (see
// sessions); every form carries the session's CSRF token.
package console

import (
	"crypto/rand"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/plaudit/plaudit/transport/api"
)

//go:embed web
var webFS embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// Config configures the console; zero fields take defaults.
type Config struct {
	// SessionTTL is how long a session lasts after its last request (12h).
	SessionTTL time.Duration
	// MaxSessions bounds the sessions kept in memory for each workspace,
	// and for admin keys (10,000 each); past it the pool's least recently
	// used is dropped.
	MaxSessions int
	// Poll is how often the agent page asks whether the agent changed (3s).
	Poll   time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Console serves the web console over one service.
type Console struct {
	cfg      Config
	svc      *api.Service
	sessions *sessions
	secret   [32]byte // keys the sign-in forms' CSRF tokens (signinForm)
	pages    map[string]*template.Template
	static   http.Handler
	mux      *http.ServeMux
}

// New returns the console over svc.
func New(cfg Config, svc *api.Service) (*Console, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 10_000
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 3 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(webFS, "web/static")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, svc: svc, sessions: newSessions(cfg.SessionTTL, cfg.MaxSessions, cfg.Now), pages: pages,
		static: http.StripPrefix(Prefix+"static/", http.FileServerFS(static))}
	_, _ = rand.Read(c.secret[:])
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"agents", http.StatusSeeOther)
	})
	m.Handle("GET /ui/static/", c.static)
	m.HandleFunc("GET /ui/signin", c.signinPage)
	m.HandleFunc("POST /ui/signin", c.signin)
	m.HandleFunc("POST /ui/signout", c.signedIn(c.signout))
	m.HandleFunc("GET /ui/agents", c.signedIn(c.agentsPage))
	m.HandleFunc("GET /ui/agents/{agent}", c.signedIn(c.agentPage))
	m.HandleFunc("GET /ui/agents/{agent}/live", c.signedIn(c.agentLive))
	m.HandleFunc("GET /ui/agents/{agent}/versions", c.signedIn(c.versionsPage))
	m.HandleFunc("GET /ui/agents/{agent}/runs/{run}", c.signedIn(c.runPage))
	m.HandleFunc("GET /ui/agents/{agent}/objective", c.signedIn(c.objectivePage))
	m.HandleFunc("POST /ui/agents/{agent}/objective/preview", c.signedIn(c.previewDraft))
	m.HandleFunc("GET /ui/tasks", c.signedIn(c.tasksPage))
	// Any other path, or method, under /ui/: the console's own 404 page,
	// not the mux's line of plain text.
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, c.current(r), &errService{status: http.StatusNotFound, message: "There is no such page."})
	})
	c.mux = m
}

// ServeHTTP serves one console request. Every answer is marked not to be
// cached or framed: pages hold a workspace's data and forms.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'")
	if !isStatic(r.URL.Path) {
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

func isStatic(path string) bool {
	return len(path) > len(Prefix+"static/") && path[:len(Prefix+"static/")] == Prefix+"static/"
}

// errService is a service answer other than success, kept whole for the
// error page.
type errService struct {
	status  int
	code    string
	message string
}

func (e *errService) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

// ask runs one read as the session's key and decodes its JSON answer into
// out.
func (c *Console) ask(s *session, op api.Op, target api.Target, query map[string]string, out any) error {
	req := &api.Request{Op: op, Principal: s.principal, Target: target, RequestID: c.svc.RequestID(),
		Started: c.svc.Stamp(), Door: api.DoorConsole, Arrived: time.Now()}
	if len(query) > 0 {
		req.Query = api.ArgsMap(query)
	}
	return c.answer(op, c.svc.Handle(req), out)
}

// askBody runs one operation with a JSON body as the session's key and
// decodes its answer into out.
func (c *Console) askBody(s *session, op api.Op, target api.Target, body []byte, out any) error {
	req := &api.Request{Op: op, Principal: s.principal, Target: target, Body: body, RequestID: c.svc.RequestID(),
		Started: c.svc.Stamp(), Door: api.DoorConsole, Arrived: time.Now()}
	return c.answer(op, c.svc.Handle(req), out)
}

// answer decodes a service answer: its JSON into out, or other than a
// success an *errService.
func (c *Console) answer(op api.Op, resp api.Response, out any) error {
	if resp.Status >= 300 {
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(resp.Body, &body)
		msg := body.Error.Message
		if msg == "" {
			msg = resp.Message
		}
		return &errService{status: resp.Status, code: body.Error.Code, message: msg}
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("console: %s answer: %w", op, err)
	}
	return nil
}

// fail renders an error page: the service's status and message, or 500.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status, msg := http.StatusInternalServerError, "Something went wrong; the server log has the details."
	if e := (*errService)(nil); errors.As(err, &e) {
		status, msg = e.status, e.message
	} else {
		c.cfg.Logger.Error("console page failed", "path", r.URL.Path, "err", err)
	}
	c.render(w, r, s, status, "error", map[string]any{"Title": http.StatusText(status), "Status": status, "Message": msg})
}

func asErr(err error, target **errService) bool { return err != nil && errors.As(err, target) }
