package console

import (
	"testing"
	"time"
)

func TestSessionsExpireAndStayBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ss := newSessions(time.Hour, 2, func() time.Time { return now })

	a := ss.create("key-a")
	if ss.get(a.id) == nil {
		t.Fatal("a new session is not found")
	}
	// Use slides expiry: 50 minutes, used, 50 more minutes: still alive.
	now = now.Add(50 * time.Minute)
	ss.get(a.id)
	now = now.Add(50 * time.Minute)
	if ss.get(a.id) == nil {
		t.Fatal("a session used within its TTL expired")
	}
	now = now.Add(61 * time.Minute)
	if ss.get(a.id) != nil {
		t.Fatal("an idle session outlived its TTL")
	}

	// Visitors fill their own pool: they evict each other, never the
	// signed-in sessions; those evict the least recently used of theirs.
	b, c := ss.create("key-b"), ss.create("key-c")
	for range 5 {
		ss.create("")
	}
	if ss.get(b.id) == nil || ss.get(c.id) == nil {
		t.Fatal("visitors pushed a signed-in session out")
	}
	ss.get(b.id) // c is now the least recently used
	d := ss.create("key-d")
	if ss.get(c.id) != nil || ss.get(b.id) == nil || ss.get(d.id) == nil {
		t.Error("past the bound, the least recently used signed-in session should go, and only it")
	}
	if a.id == b.id || a.csrf == b.csrf || len(a.id) != 64 {
		t.Error("session ids and tokens must be distinct 256-bit randoms")
	}
	ss.end(b.id)
	if ss.get(b.id) != nil {
		t.Error("an ended session is still found")
	}
}
