// Package ids makes the platform's identifiers: a type prefix and a
// time-ordered hex body, so that sorting by ID is sorting by creation
// (what `order=id|-id` and `starting_after_id` cursors rely on).
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// The body is 12 hex digits of Unix milliseconds followed by 10 hex digits
// (40 bits) that are random for the first ID of a millisecond and count up
// from there, so IDs made by one process are strictly increasing.
var (
	mu      sync.Mutex
	lastMS  int64
	lastSeq uint64
)

const seqMask = 1<<40 - 1

// New returns a fresh ID with the given prefix, e.g. New("cust_").
func New(prefix string) string {
	ms := time.Now().UnixMilli()
	mu.Lock()
	if ms <= lastMS {
		ms = lastMS
		lastSeq++
		if lastSeq > seqMask { // 2^40 IDs in one millisecond: borrow the next one
			ms++
			lastSeq = randomSeq()
		}
	} else {
		lastSeq = randomSeq()
	}
	lastMS = ms
	seq := lastSeq
	mu.Unlock()

	var b [11]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(ms)<<16) // 48 bits of ms in b[0:6]
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	copy(b[6:11], s[3:8])
	out := make([]byte, len(prefix)+22)
	copy(out, prefix)
	hex.Encode(out[len(prefix):], b[:])
	return string(out)
}

// randomSeq starts a millisecond low in the 40-bit space so that counting up
// from it cannot overflow in practice.
func randomSeq() uint64 {
	var s [8]byte
	_, _ = rand.Read(s[3:8])
	return binary.BigEndian.Uint64(s[:]) & (seqMask >> 1)
}

// Secret returns n random bytes as hex, for tokens and signing secrets.
func Secret(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("ids: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b)
}
