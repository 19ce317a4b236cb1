package pebblelog

import (
	"bytes"
	"encoding/binary"
	"strings"

	"github.com/plaudit/plaudit/persist"
)

const (
	eventTag    = 'e'
	snapshotTag = 's'
	dirTag      = 'd'
	highTag     = 'h'
	seqLen      = 8
)

func validAgent(agent string) error {
	if agent == "" || strings.IndexByte(agent, '/') >= 0 {
		return persist.ErrInvalid
	}
	return nil
}

// eventPrefix returns "e/<agent>/".
func eventPrefix(agent string) []byte {
	k := make([]byte, 0, 3+len(agent)+seqLen)
	k = append(k, eventTag, '/')
	k = append(k, agent...)
	return append(k, '/')
}

// appendEventKey appends "e/<agent>/<seq>" to dst.
func appendEventKey(dst []byte, agent string, seq uint64) []byte {
	dst = append(dst, eventTag, '/')
	dst = append(dst, agent...)
	dst = append(dst, '/')
	return binary.BigEndian.AppendUint64(dst, seq)
}

func eventKeyLen(agent string) int { return 3 + len(agent) + seqLen }

func eventKey(agent string, seq uint64) []byte {
	return appendEventKey(make([]byte, 0, eventKeyLen(agent)), agent, seq)
}

// eventUpper returns "e/<agent>0", the exclusive upper bound of the agent's
// events ('0' is '/'+1).
func eventUpper(agent string) []byte {
	k := eventPrefix(agent)
	k[len(k)-1] = '/' + 1
	return k
}

// seqOf parses the sequence from an event key of agent, reporting false if
// the key is not exactly prefix + 8 bytes.
func seqOf(key []byte, prefixLen int) (uint64, bool) {
	if len(key) != prefixLen+seqLen {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[prefixLen:]), true
}

func snapshotKey(agent string) []byte {
	k := make([]byte, 0, 2+len(agent))
	k = append(k, snapshotTag, '/')
	return append(k, agent...)
}

// highKey returns "e/<agent>0", whose value is the agent's high-water mark:
// the last sequence number ever appended, 8 bytes big-endian. It is the
// upper bound of the agent's events, outside their range but next to the
// newest: written in the same batch, right after them, it goes into
// Pebble's memtable beside the event just inserted, where "h/<agent>"
// took a second search of the skiplist from its top (for an append of
// one event, half the memtable's cost).
func highKey(agent string) []byte { return eventUpper(agent) }

// legacyHighKey returns "h/<agent>", where stores written before highKey
// kept the mark. It is still read: the larger of the two marks counts.
func legacyHighKey(agent string) []byte {
	k := make([]byte, 0, 2+len(agent))
	k = append(k, highTag, '/')
	return append(k, agent...)
}

// parseHighKey returns the agent of a high-water key "e/<agent>0". Event
// keys always hold a second '/' (before their seq); this one cannot, as
// agent ids hold none.
func parseHighKey(k []byte) (agent string, ok bool) {
	if len(k) < 4 || k[0] != eventTag || k[1] != '/' || k[len(k)-1] != '/'+1 ||
		bytes.IndexByte(k[2:], '/') >= 0 {
		return "", false
	}
	return string(k[2 : len(k)-1]), true
}

func dirKey(key []byte) []byte { return appendDirKey(make([]byte, 0, 2+len(key)), key) }

// appendDirKey appends "d/<key>" to dst.
func appendDirKey(dst, key []byte) []byte { return append(append(dst, dirTag, '/'), key...) }

// prefixEnd returns the smallest key greater than every key with prefix p.
// Directory prefixes always start with "d/", so a successor exists.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
