package console

import (
	"container/list"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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

// session is one signed-in browser's state: its CSRF token and the key it
// signed in with. The key is re-authenticated on every request, so a
// revoked key signs its sessions out at once.
type session struct {
	id       string
	csrf     string
	key      string
	expires  time.Time
	cookieAt time.Time // when its cookie was last sent, with TTL to live
	elem     *list.Element
	pool     string // its pool in sessions.pools

	principal tenancy.Principal // set per request by signedIn
	renew     bool              // set by get: the cookie is due to be sent again

	drafts []keptDraft // the drafts tried last, oldest first; read under sessions.mu
}

// keptDraft is a draft tried from an objective page, kept in its session
// so that the page showing its preview is a GET (POST, then redirect):
// Back and reload show it again instead of asking to send the form again.
type keptDraft struct {
	token, agent string
	form         draftForm
	elem         *list.Element // in its pool's draft list (sessions.drafts)
}

// size is what a kept draft counts against its pool's draft budget.
func (d keptDraft) size() int { return len(d.form.Definition) + len(d.form.Version) + len(d.agent) }

// maxDrafts is how many tried drafts a session keeps, the newest.
const maxDrafts = 4

// maxPoolDraftBytes bounds the drafts kept by all the sessions of one pool
// (a workspace's, or the admin keys'): past it, the pool's oldest go. A
// draft may be as long as a request body (1 MiB), and a pool holds up to
// MaxSessions sessions: without it, one key signing in again and again and
// trying long drafts could make the server hold gigabytes.
const maxPoolDraftBytes = 4 << 20

// sessions are kept in memory, so a restart signs everyone out: a session
// holds an API key, and keeping keys on disk beside their hashes would
// undo the point of storing only hashes. Expiry slides with use (TTL after
// the last request). Sessions are pooled by workspace, admin keys' in a
// pool of their own, each pool bounded by max: past it, the pool's least
// recently used goes, so signing in over and over with one workspace's
// keys pushes out only that workspace's sessions. Visitors hold no session
// (see signinForm).
type sessions struct {
	mu    sync.Mutex
	byID  map[string]*session
	pools map[string]*list.List // front: most recently used
	// drafts lists each pool's kept drafts, oldest first (values: the
	// *session keeping it and its token, as draftRef), and draftBytes
	// their sizes' sum.
	drafts     map[string]*list.List
	draftBytes map[string]int
	ttl        time.Duration
	max        int
	now        func() time.Time
}

// draftRef is a kept draft in its pool's list.
type draftRef struct {
	s     *session
	token string
}

// adminPool is the pool of admin keys' sessions: never a workspace id.
const adminPool = "\x00admin"

func newSessions(ttl time.Duration, max int, now func() time.Time) *sessions {
	return &sessions{byID: map[string]*session{}, pools: map[string]*list.List{}, drafts: map[string]*list.List{},
		draftBytes: map[string]int{}, ttl: ttl, max: max, now: now}
}

func token() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// get returns the live session with that id, extending it; nil if none.
// Its cookie, sent with TTL to live, is due again (renew) once a twelfth
// of TTL has passed since it was last sent, so a browser in use never
// drops it.
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
	ss.pools[s.pool].MoveToFront(s.elem)
	cp := *s
	if now.Sub(s.cookieAt) >= ss.ttl/12 {
		s.cookieAt = now
		cp.renew = true
	}
	return &cp
}

// create starts a session holding key, in pool.
func (ss *sessions) create(key, pool string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	lru := ss.pools[pool]
	if lru == nil {
		lru = list.New()
		ss.pools[pool] = lru
	}
	for lru.Len() >= ss.max {
		ss.drop(lru.Back().Value.(*session))
	}
	now := ss.now()
	s := &session{id: token(), csrf: token(), key: key, expires: now.Add(ss.ttl), cookieAt: now, pool: pool}
	s.elem = lru.PushFront(s)
	ss.byID[s.id] = s
	cp := *s
	return &cp
}

// keepDraft keeps a draft tried on agent in the session with that id and
// returns the token the page showing it is asked with; "" when the
// session is gone.
func (ss *sessions) keepDraft(id, agent string, form draftForm) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s == nil {
		return ""
	}
	for len(s.drafts) >= maxDrafts {
		ss.forgetDraft(s, s.drafts[0].token)
	}
	d := keptDraft{token: token()[:24], agent: agent, form: form}
	kept := ss.drafts[s.pool]
	if kept == nil {
		kept = list.New()
		ss.drafts[s.pool] = kept
	}
	d.elem = kept.PushBack(draftRef{s, d.token})
	s.drafts = append(s.drafts, d)
	ss.draftBytes[s.pool] += d.size()
	for ss.draftBytes[s.pool] > maxPoolDraftBytes {
		ref := kept.Front().Value.(draftRef)
		ss.forgetDraft(ref.s, ref.token)
	}
	return d.token
}

// forgetDraft drops the draft session s keeps under token.
func (ss *sessions) forgetDraft(s *session, token string) {
	for i, d := range s.drafts {
		if d.token != token {
			continue
		}
		s.drafts = append(s.drafts[:i:i], s.drafts[i+1:]...)
		kept := ss.drafts[s.pool]
		kept.Remove(d.elem)
		if ss.draftBytes[s.pool] -= d.size(); kept.Len() == 0 {
			delete(ss.drafts, s.pool)
			delete(ss.draftBytes, s.pool)
		}
		return
	}
}

// draft returns the draft the session with that id keeps for agent under
// token.
func (ss *sessions) draft(id, agent, token string) (draftForm, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.byID[id]; s != nil {
		for _, d := range s.drafts {
			if d.token == token && d.agent == agent {
				return d.form, true
			}
		}
	}
	return draftForm{}, false
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
	for len(s.drafts) > 0 {
		ss.forgetDraft(s, s.drafts[0].token)
	}
	lru := ss.pools[s.pool]
	lru.Remove(s.elem)
	if lru.Len() == 0 {
		delete(ss.pools, s.pool)
	}
	delete(ss.byID, s.id)
}

// secure reports whether the browser reached us over TLS, directly or
// through a proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// The session cookie is SameSite=Lax: a link to a console page from
// elsewhere (a chat, a ticket) opens the page for a visitor signed in,
// where Strict sent them to sign in again. Lax sends it on top-level GETs
// only, and every POST of the console checks its CSRF token.
func setCookie(w http.ResponseWriter, r *http.Request, s *session, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.id, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: secure(r), MaxAge: int(ttl.Seconds())})
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: secure(r), MaxAge: -1})
}

// current returns the request's session, or nil.
func (c *Console) current(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	return c.sessions.get(ck.Value)
}

// signinCookie holds a visitor's sign-in nonce. The sign-in form's CSRF
// token is the nonce's HMAC under the console's secret, so a visitor takes
// no memory on the server, and no flood of visits can push a pending form
// out.
const signinCookie = "plaudit_signin"

// signinForm returns the request's sign-in form token, sending a fresh
// nonce when the request has none.
func (c *Console) signinForm(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(signinCookie); err == nil && len(ck.Value) == 64 {
		return c.signinToken(ck.Value)
	}
	nonce := token()
	http.SetCookie(w, &http.Cookie{Name: signinCookie, Value: nonce, Path: Prefix + "signin", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r), MaxAge: int(c.cfg.SessionTTL.Seconds())})
	return c.signinToken(nonce)
}

func (c *Console) signinToken(nonce string) string {
	m := hmac.New(sha256.New, c.secret[:])
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// signinCSRF reports whether a sign-in form carries its nonce's token.
func (c *Console) signinCSRF(r *http.Request) bool {
	ck, err := r.Cookie(signinCookie)
	got := r.PostFormValue("csrf")
	return err == nil && got != "" && hmac.Equal([]byte(got), []byte(c.signinToken(ck.Value)))
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
		if s != nil {
			p, err := c.svc.Tenancy().AuthenticateKey(s.key)
			if err != nil { // revoked since sign-in
				c.sessions.end(s.id)
				s = nil
			} else {
				s.principal = p
			}
		}
		if s == nil {
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
		if s.renew {
			setCookie(w, r, s, c.cfg.SessionTTL)
		}
		h(w, r, s)
	}
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	form := &session{csrf: c.signinForm(w, r)}
	c.render(w, r, form, http.StatusOK, "signin", map[string]any{"Title": "Sign in", "Next": safeNext(r.URL.Query().Get("next"))})
}

// signin checks the key and starts a new session for it: a session the
// browser had is ended, not reused, so an id planted before sign-in is
// worthless.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	if !c.signinCSRF(r) {
		http.Error(w, "the form is stale: reload the page and try again", http.StatusForbidden)
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	next := safeNext(r.PostFormValue("next"))
	p, err := c.svc.Tenancy().AuthenticateKey(key)
	if err != nil {
		form := &session{csrf: c.signinForm(w, r)}
		c.render(w, r, form, http.StatusUnauthorized, "signin", map[string]any{"Title": "Sign in", "Next": next,
			"Error": "That key is not valid (or has been revoked)."})
		return
	}
	if old := c.current(r); old != nil {
		c.sessions.end(old.id)
	}
	pool := p.Home
	if p.Admin {
		pool = adminPool
	}
	ns := c.sessions.create(key, pool)
	setCookie(w, r, ns, c.cfg.SessionTTL)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, s *session) {
	c.sessions.end(s.id)
	clearCookie(w, r)
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// safeNext keeps a post-sign-in destination inside the console: a path
// under Prefix, without a backslash or a control character.
func safeNext(next string) string {
	bad := strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' })
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || bad {
		return Prefix + "agents"
	}
	return next
}
