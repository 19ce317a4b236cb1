// Package freeport finds loopback addresses for a listener that is named
// before the process that opens it starts: a NATS route every node lists,
// a child server's flags. A port checked free and then closed can be taken
// by anyone before its owner binds it. The usual takers are listeners on
// port 0 and outgoing connections, and the kernel gives both their ports
// from its ephemeral range (net.ipv4.ip_local_port_range), so the ports
// here come from below it, where only another caller of this package
// could take them.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is where the ports start: above the well-known and the commonly
// configured ones.
const lowest = 10000

// Addrs returns n distinct loopback addresses (127.0.0.1:port) whose ports
// were free a moment ago and lie below the ephemeral range.
func Addrs(n int) ([]string, error) {
	top := ephemeralStart()
	if top-lowest < 1000 {
		return nil, fmt.Errorf("freeport: the ephemeral range starts at %d, leaving too few ports below it", top)
	}
	addrs := make([]string, 0, n)
	seen := map[int]bool{}
	for tries := 0; len(addrs) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("freeport: %d free ports not found in %d tries", n, tries)
		}
		port := lowest + rand.IntN(top-lowest)
		if seen[port] {
			continue
		}
		seen[port] = true
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = ln.Close()
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range: Linux's
// setting, or, where it cannot be read, the range IANA suggests (which
// Linux's default, 32768, lies below).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil {
				return lo
			}
		}
	}
	return 32768
}
