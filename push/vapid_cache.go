package push

import (
	"crypto/sha256"
	"net/http"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultVAPIDCacheSize is how many verified VAPID tokens a node keeps.
// An application server signs one token per audience and reuses it until
// near its exp (at most MaxVAPIDExpiry), so a sender's every message after
// the first carries a token already verified; 4,096 entries of ~150 bytes
// cover that many concurrent senders in under 1 MB.
const DefaultVAPIDCacheSize = 4096

// VAPIDCache remembers verified VAPID tokens until their exp, so a sender
// that reuses its token (as every application server library does) pays
// the ECDSA P-256 verification once, not per message: the verification was
// the largest single cost of a send (issue 25).
//
// The key is a SHA-256 of the token, the public key and the audience
// together, so a hit is the exact bytes verified before against the same
// key for the same origin. Failures are not cached: a token that failed
// is verified again, as before. An entry answers only until its token's
// exp; after that the request is verified again and fails as expired. The
// 24-hour bound on exp holds on a hit too: it was at most 24 hours ahead
// when verified, and is less now.
type VAPIDCache struct {
	c *lru.Cache[[32]byte, VAPID]
}

// NewVAPIDCache returns a cache of size entries (DefaultVAPIDCacheSize
// when size <= 0).
func NewVAPIDCache(size int) *VAPIDCache {
	if size <= 0 {
		size = DefaultVAPIDCacheSize
	}
	c, _ := lru.New[[32]byte, VAPID](size) // only a size <= 0 fails
	return &VAPIDCache{c: c}
}

// Parse is ParseVAPID through the cache.
func (vc *VAPIDCache) Parse(h http.Header, audience string, now time.Time) (*VAPID, error) {
	tok, key, err := vapidHeader(h)
	if tok == "" || err != nil {
		return nil, err
	}
	// The key's input in one stack buffer (an application server's token
	// and key are about 400 bytes; a longer header, up to
	// maxAuthorizationLen, spills to the heap), not a digest per request.
	var buf [1024]byte
	in := buf[:0]
	for _, part := range [...]string{tok, key, audience} {
		in = append(append(in, part...), 0)
	}
	id := sha256.Sum256(in)
	if v, ok := vc.c.Get(id); ok {
		if v.Expires.After(now) {
			return &v, nil
		}
		vc.c.Remove(id)
	}
	v, err := verifyVAPID(tok, key, audience, now)
	if err != nil {
		return nil, err
	}
	vc.c.Add(id, *v)
	return v, nil
}

// Len is the number of tokens cached.
func (vc *VAPIDCache) Len() int { return vc.c.Len() }
