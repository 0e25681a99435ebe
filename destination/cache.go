package destination

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldhq/herald"
)

// DefaultConnectionTTL is how long a Cache keeps a connection it read: an
// operator's change (a new password, a revoked grant, a deleted
// connection) reaches every node within it, and a busy publisher reads
// the store at most once per connection per TTL instead of per attempt.
const DefaultConnectionTTL = 2 * time.Second

// ConnectionGetter reads one connection with its URL readable (store.Store
// implements it; herald.ErrNotFound when there is none).
type ConnectionGetter interface {
	ConnectionGet(ctx context.Context, name string) (*herald.Connection, error)
}

// Cache is a Connections backed by a ConnectionGetter (the store) with a
// short time-to-live. Found and not-found answers are cached; other
// errors (the store unavailable) are not, so the next attempt asks again.
// Callers must not modify the connections it returns.
type Cache struct {
	src ConnectionGetter
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	conn *herald.Connection
	err  error // a not-found answer
	at   time.Time
}

var _ Connections = (*Cache)(nil)

// NewCache returns a Cache over src keeping answers for ttl
// (DefaultConnectionTTL when ≤ 0).
func NewCache(src ConnectionGetter, ttl time.Duration) *Cache {
	if ttl <= 0 {
		ttl = DefaultConnectionTTL
	}
	return &Cache{src: src, ttl: ttl, now: time.Now, entries: map[string]cacheEntry{}}
}

// ConnectionResolve implements Connections. A connection whose stored URL
// the configured keys cannot open (store.ConnectionURLOpen gave "") is an
// error, not a connection to an empty URL.
func (c *Cache) ConnectionResolve(ctx context.Context, name string) (*herald.Connection, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[name]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.conn, e.err
	}
	conn, err := c.src.ConnectionGet(ctx, name)
	switch {
	case errors.Is(err, herald.ErrNotFound):
	case err != nil:
		return nil, err
	case conn.URL == "":
		conn, err = nil, fmt.Errorf("the URL of connection %q cannot be decrypted with the configured --encryption-key", name)
	}
	c.mu.Lock()
	c.entries[name] = cacheEntry{conn: conn, err: err, at: now}
	c.mu.Unlock()
	return conn, err
}
