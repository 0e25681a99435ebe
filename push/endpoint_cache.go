package push

import (
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultEndpointCacheSize is how many decrypted endpoint tokens a node
// keeps. An application server sends to the same subscriptions again and
// again, and verifying a token (HMAC-SHA256 and AES-CBC) was a send's
// largest cost left after the VAPID cache (issue 25). An entry is the token
// (140 or 183 bytes) and its Endpoint, about 400 bytes with the LRU's own:
// 8,192 of them stay under 4 MB, and only senders fill them.
const DefaultEndpointCacheSize = 8192

// endpointCache remembers tokens that decrypted, keyed by the exact token
// text and its path version, so a hit is the very bytes verified before
// for the same route. Failures are not cached: a forged token costs a
// decryption every time, as before. Keys never change in a running node,
// so an entry stays true until evicted. The cached Endpoint is shared:
// callers must not change it.
type endpointCache struct {
	c *lru.Cache[endpointCacheKey, *Endpoint]
}

type endpointCacheKey struct {
	token   string
	version int // 1 or 2 (0 is read as 1)
}

func newEndpointCache(size int) *endpointCache {
	if size <= 0 {
		size = DefaultEndpointCacheSize
	}
	c, _ := lru.New[endpointCacheKey, *Endpoint](size) // only a size <= 0 fails
	return &endpointCache{c: c}
}

// parse is Keys.ParseEndpointToken through the cache.
func (ec *endpointCache) parse(k *Keys, token string, version int) (*Endpoint, error) {
	if version == 0 {
		version = 1
	}
	key := endpointCacheKey{token, version}
	if e, ok := ec.c.Get(key); ok {
		return e, nil
	}
	e, err := k.ParseEndpointToken(token, version)
	if err != nil {
		return nil, err
	}
	// The token's text is a substring of the request path: keep a copy
	// of its own, not the whole path's memory.
	key.token = strings.Clone(token)
	ec.c.Add(key, e)
	return e, nil
}
