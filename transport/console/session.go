package console

import (
	"container/list"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/plaudit/plaudit/transport/tenancy"
)

// cookieName names the session cookie; its value is the session id, never
// the key.
const cookieName = "plaudit_session"

// session is one browser's state: its CSRF token from the first visit, and
// once signed in, the key it signed in with. The key is re-authenticated on
// every request, so a revoked key signs its sessions out at once.
type session struct {
	id      string
	csrf    string
	key     string // "" until signed in
	expires time.Time
	elem    *list.Element
	lru     *list.List // the one of sessions.lru it is in

	principal tenancy.Principal // set per request by signedIn
}

// sessions are kept in memory, so a restart signs everyone out: a session
// holds an API key, and keeping keys on disk beside their hashes would
// undo the point of storing only hashes. Expiry slides with use (TTL after
// the last request); past max, the least recently used goes. Visitors (not
// signed in) and signed-in sessions are bounded apart, so a flood of
// visits to the sign-in form cannot push anyone signed in out.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	lru  [2]*list.List // visitors, signed in; front: most recently used
	ttl  time.Duration
	max  int
	now  func() time.Time
}

func newSessions(ttl time.Duration, max int, now func() time.Time) *sessions {
	return &sessions{byID: map[string]*session{}, lru: [2]*list.List{list.New(), list.New()}, ttl: ttl, max: max, now: now}
}

func token() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// get returns the live session with that id, extending it; nil if none.
func (ss *sessions) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s == nil {
		return nil
	}
	now := ss.now()
	if now.After(s.expires) {
		ss.drop(s)
		return nil
	}
	s.expires = now.Add(ss.ttl)
	s.lru.MoveToFront(s.elem)
	cp := *s
	return &cp
}

// create starts a session holding key ("" for a visitor not signed in).
func (ss *sessions) create(key string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	lru := ss.lru[0]
	if key != "" {
		lru = ss.lru[1]
	}
	for lru.Len() >= ss.max {
		ss.drop(lru.Back().Value.(*session))
	}
	s := &session{id: token(), csrf: token(), key: key, expires: ss.now().Add(ss.ttl), lru: lru}
	s.elem = lru.PushFront(s)
	ss.byID[s.id] = s
	cp := *s
	return &cp
}

// end forgets the session with that id.
func (ss *sessions) end(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.byID[id]; s != nil {
		ss.drop(s)
	}
}

func (ss *sessions) drop(s *session) {
	s.lru.Remove(s.elem)
	delete(ss.byID, s.id)
}

// secure reports whether the browser reached us over TLS, directly or
// through a proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func setCookie(w http.ResponseWriter, r *http.Request, s *session, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.id, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r), MaxAge: int(ttl.Seconds())})
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r), MaxAge: -1})
}

// current returns the request's session, or nil.
func (c *Console) current(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	return c.sessions.get(ck.Value)
}

// visitor returns the request's session, starting one (not signed in) when
// it has none, so the sign-in form has a CSRF token too.
func (c *Console) visitor(w http.ResponseWriter, r *http.Request) *session {
	if s := c.current(r); s != nil {
		return s
	}
	s := c.sessions.create("")
	setCookie(w, r, s, c.cfg.SessionTTL)
	return s
}

// checkCSRF reports whether a form carries the session's token.
func checkCSRF(r *http.Request, s *session) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

// signedIn wraps a page for signed-in sessions: without one it redirects
// to the sign-in form (a page) or answers 401 (the live poll); a POST must
// carry the session's CSRF token (else 403).
func (c *Console) signedIn(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.current(r)
		if s != nil && s.key != "" {
			p, err := c.svc.Tenancy().AuthenticateKey(s.key)
			if err != nil { // revoked since sign-in
				c.sessions.end(s.id)
				s = nil
			} else {
				s.principal = p
			}
		}
		if s == nil || s.key == "" {
			if strings.HasSuffix(r.URL.Path, "/live") || r.Method != http.MethodGet {
				http.Error(w, "signed out", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, Prefix+"signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost && !checkCSRF(r, s) {
			http.Error(w, "the form is stale: reload the page and try again", http.StatusForbidden)
			return
		}
		h(w, r, s)
	}
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	s := c.visitor(w, r)
	c.render(w, r, s, http.StatusOK, "signin", map[string]any{"Title": "Sign in", "Next": safeNext(r.URL.Query().Get("next"))})
}

// signin checks the key and starts a new session for it: the visitor's
// session id is not reused, so an id planted before sign-in is worthless.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	s := c.current(r)
	if s == nil || !checkCSRF(r, s) {
		http.Error(w, "the form is stale: reload the page and try again", http.StatusForbidden)
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	next := safeNext(r.PostFormValue("next"))
	if _, err := c.svc.Tenancy().AuthenticateKey(key); err != nil {
		c.render(w, r, s, http.StatusUnauthorized, "signin", map[string]any{"Title": "Sign in", "Next": next,
			"Error": "That key is not valid (or has been revoked)."})
		return
	}
	c.sessions.end(s.id)
	ns := c.sessions.create(key)
	setCookie(w, r, ns, c.cfg.SessionTTL)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, s *session) {
	c.sessions.end(s.id)
	clearCookie(w, r)
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// safeNext keeps a post-sign-in destination inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix + "agents"
	}
	return next
}
