package console

import (
	"strconv"
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
