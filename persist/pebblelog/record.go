package pebblelog

import (
	"encoding/binary"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const crcLen = 4

// recordCRC is CRC32C over agent, seq (8 bytes big-endian) and payload.
func recordCRC(agent string, seq uint64, payload []byte) uint32 {
	var s [seqLen]byte
	binary.BigEndian.PutUint64(s[:], seq)
	c := crc32.Update(0, castagnoli, []byte(agent))
	c = crc32.Update(c, castagnoli, s[:])
	return crc32.Update(c, castagnoli, payload)
}

// putRecord fills dst (len crcLen+len(payload)) with the event record.
func putRecord(dst []byte, agent string, seq uint64, payload []byte) {
	binary.BigEndian.PutUint32(dst, recordCRC(agent, seq, payload))
	copy(dst[crcLen:], payload)
}

// checkRecord returns the payload of a record (aliasing v) and whether its
// checksum holds.
func checkRecord(v []byte, agent string, seq uint64) ([]byte, bool) {
	if len(v) < crcLen {
		return nil, false
	}
	payload := v[crcLen:]
	return payload, binary.BigEndian.Uint32(v) == recordCRC(agent, seq, payload)
}
