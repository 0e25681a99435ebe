package herald

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

// Id prefixes.
const (
	PrefixEvent        = "evt_"
	PrefixSubscription = "sub_"
	PrefixDelivery     = "dlv_"
	PrefixToken        = "tok_"
	// PrefixPortalLink names consumer-portal links (ADR 0015).
	PrefixPortalLink = "pl_"
	// PrefixPushMessage names stored Web Push messages (package push).
	PrefixPushMessage = "pm_"
)

// crockford base32, lower case: sortable as strings.
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

var idState struct {
	sync.Mutex
	lastMS uint64
	seq    uint64
}

// NewID returns prefix + 26 characters: 48 bits of milliseconds followed by
// 80 bits that are random at the start of each millisecond and increase
// within it, so ids made by one process sort in creation order (cursors and
// FIFO ties rely on that) and ids from different nodes do not collide.
func NewID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	idState.Lock()
	if ms <= idState.lastMS {
		ms = idState.lastMS
		idState.seq++
	} else {
		idState.lastMS = ms
		var r [8]byte
		_, _ = rand.Read(r[:])
		idState.seq = binary.BigEndian.Uint64(r[:]) >> 1 // headroom for increments
	}
	seq := idState.seq
	idState.Unlock()
	binary.BigEndian.PutUint64(b[0:8], ms<<16)
	var tail [8]byte
	_, _ = rand.Read(tail[:2])
	binary.BigEndian.PutUint16(b[6:8], uint16(seq>>48))
	binary.BigEndian.PutUint64(b[8:16], seq<<16|uint64(binary.BigEndian.Uint16(tail[:2])))
	// 128 bits -> 26 base32 chars (130 bits, top 2 zero).
	out := make([]byte, len(prefix)+26)
	copy(out, prefix)
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	for i := 25; i >= 0; i-- {
		out[len(prefix)+i] = idAlphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}
