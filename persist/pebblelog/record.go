package pebblelog

import (
	"encoding/binary"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const crcLen = 4

// recordCRC is CRC32C over the event key (which spells out agent and seq)
// and the payload. Hashing the key rather than a re-encoding of its fields
// costs no allocation and catches a record stored under the wrong key.
func recordCRC(key, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, payload)
}

// putRecord fills dst (len crcLen+len(payload)) with the record for key.
func putRecord(dst, key, payload []byte) {
	binary.BigEndian.PutUint32(dst, recordCRC(key, payload))
	copy(dst[crcLen:], payload)
}

// checkRecord returns the payload of the record v stored at key (aliasing v)
// and whether its checksum holds.
func checkRecord(key, v []byte) ([]byte, bool) {
	if len(v) < crcLen {
		return nil, false
	}
	payload := v[crcLen:]
	return payload, binary.BigEndian.Uint32(v) == recordCRC(key, payload)
}
