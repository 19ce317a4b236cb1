package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestAddrsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	addrs, err := Addrs(20)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 20 {
		t.Fatalf("%d addresses, want 20", len(addrs))
	}
	top := ephemeralStart()
	seen := map[string]bool{}
	for _, a := range addrs {
		host, p, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if host != "127.0.0.1" || port < lowest || port >= top {
			t.Errorf("%s: want 127.0.0.1 and a port in [%d, %d)", a, lowest, top)
		}
		if seen[a] {
			t.Errorf("%s given twice", a)
		}
		seen[a] = true
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s is not free: %v", a, err)
			continue
		}
		_ = ln.Close()
	}
}
