package console

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSessionsExpireAndStayBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ss := newSessions(time.Hour, 2, func() time.Time { return now })

	a := ss.create("key-a", "ws1")
	if ss.get(a.id) == nil {
		t.Fatal("a new session is not found")
	}
	// Use slides expiry: 50 minutes, used, 50 more minutes: still alive.
	// Its cookie is due again once a twelfth of the TTL has passed.
	now = now.Add(50 * time.Minute)
	if s := ss.get(a.id); s == nil || !s.renew {
		t.Fatalf("a session used 50 minutes after its cookie was sent: %+v, want it found with its cookie due", s)
	}
	if s := ss.get(a.id); s == nil || s.renew {
		t.Fatalf("a session whose cookie was just sent again: %+v, want it found, its cookie not due", s)
	}
	now = now.Add(50 * time.Minute)
	if ss.get(a.id) == nil {
		t.Fatal("a session used within its TTL expired")
	}
	now = now.Add(61 * time.Minute)
	if ss.get(a.id) != nil {
		t.Fatal("an idle session outlived its TTL")
	}

	// Each workspace's sessions, and admin keys', fill a pool of their own:
	// signing in again and again in one pushes out only its own least
	// recently used.
	b, c := ss.create("key-b", "ws1"), ss.create("key-c", "ws1")
	admin := ss.create("key-admin", adminPool)
	other := ss.create("key-o", "ws2")
	for range 5 {
		ss.create("key-flood", "ws2")
	}
	if ss.get(b.id) == nil || ss.get(c.id) == nil || ss.get(admin.id) == nil {
		t.Fatal("another workspace's sign-ins pushed a session out")
	}
	if ss.get(other.id) != nil {
		t.Error("a workspace's sign-ins past its bound kept its least recently used session")
	}
	ss.get(b.id) // c is now ws1's least recently used
	d := ss.create("key-d", "ws1")
	if ss.get(c.id) != nil || ss.get(b.id) == nil || ss.get(d.id) == nil {
		t.Error("past the bound, the least recently used session of the pool should go, and only it")
	}
	if a.id == b.id || a.csrf == b.csrf || len(a.id) != 64 {
		t.Error("session ids and tokens must be distinct 256-bit randoms")
	}
	ss.end(b.id)
	if ss.get(b.id) != nil {
		t.Error("an ended session is still found")
	}
}

// TestSessionsKeepTheirLastDrafts: a session keeps its last maxDrafts
// drafts, each found only by its agent and token, and none once it ends.
func TestSessionsKeepTheirLastDrafts(t *testing.T) {
	ss := newSessions(time.Hour, 2, time.Now)
	s := ss.create("key", "ws")
	var tokens []string
	for i := range maxDrafts + 1 {
		tokens = append(tokens, ss.keepDraft(s.id, "agt_a", draftForm{Definition: strconv.Itoa(i)}))
	}
	if _, ok := ss.draft(s.id, "agt_a", tokens[0]); ok {
		t.Errorf("the oldest of %d drafts is still kept", maxDrafts+1)
	}
	for i, tok := range tokens[1:] {
		if d, ok := ss.draft(s.id, "agt_a", tok); !ok || d.Definition != strconv.Itoa(i+1) {
			t.Errorf("draft %d: %+v, %v", i+1, d, ok)
		}
	}
	if _, ok := ss.draft(s.id, "agt_b", tokens[1]); ok {
		t.Error("a draft is found under another agent")
	}
	ss.end(s.id)
	if _, ok := ss.draft(s.id, "agt_a", tokens[1]); ok || ss.keepDraft(s.id, "agt_a", draftForm{}) != "" {
		t.Error("an ended session still keeps drafts")
	}
}

// TestAPoolsDraftsAreBounded: the drafts kept by all the sessions of one
// pool are bounded in bytes, the oldest going first, whichever session
// keeps them; another pool's are untouched, and a session that ends
// gives its drafts' bytes back. Without the bound, one key signing in
// again and again with long drafts made the server hold 4 MiB a session.
func TestAPoolsDraftsAreBounded(t *testing.T) {
	ss := newSessions(time.Hour, 100, time.Now)
	long := draftForm{Definition: strings.Repeat("x", 1<<20)}
	other := ss.create("key-b", "ws-b")
	kept := ss.keepDraft(other.id, "agt_b", long)
	type held struct{ id, token string }
	var drafts []held
	for range 3 {
		s := ss.create("key-a", "ws-a")
		for range 2 {
			drafts = append(drafts, held{s.id, ss.keepDraft(s.id, "agt_a", long)})
		}
	}
	fit := maxPoolDraftBytes / (1 << 20) // drafts of 1 MiB (and a little) a pool holds
	for i, d := range drafts {
		_, ok := ss.draft(d.id, "agt_a", d.token)
		if want := i >= len(drafts)-fit+1; ok != want {
			t.Errorf("draft %d of %d, 1 MiB each: kept %v, want %v", i+1, len(drafts), ok, want)
		}
	}
	if _, ok := ss.draft(other.id, "agt_b", kept); !ok {
		t.Error("another workspace's draft went")
	}
	if got := ss.draftBytes["ws-a"]; got > maxPoolDraftBytes {
		t.Errorf("the pool keeps %d bytes of drafts, above %d", got, maxPoolDraftBytes)
	}
	for _, d := range drafts {
		ss.end(d.id)
	}
	ss.end(other.id)
	if len(ss.drafts) != 0 || len(ss.draftBytes) != 0 {
		t.Errorf("every session ended, yet drafts are counted: %v", ss.draftBytes)
	}
}
