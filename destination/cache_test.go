package destination

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// countingGetter answers from a Static and counts reads.
type countingGetter struct {
	*Static
	reads atomic.Int64
	fail  atomic.Bool
}

func (g *countingGetter) ConnectionGet(ctx context.Context, name string) (*herald.Connection, error) {
	g.reads.Add(1)
	if g.fail.Load() {
		return nil, herald.ErrStoreUnavailable
	}
	return g.ConnectionResolve(ctx, name)
}

func TestCache(t *testing.T) {
	t.Parallel()
	src := &countingGetter{Static: NewStatic(&herald.Connection{Name: "r", Type: herald.DestinationRedis, URL: "redis://h"},
		&herald.Connection{Name: "sealed", Type: herald.DestinationRedis})}
	c := NewCache(src, time.Minute)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return at }
	ctx := t.Context()

	for range 3 {
		got, err := c.ConnectionResolve(ctx, "r")
		require.NoError(t, err)
		require.Equal(t, "redis://h", got.URL)
	}
	require.Equal(t, int64(1), src.reads.Load(), "served from the cache within the TTL")

	// Not found is cached too.
	for range 2 {
		_, err := c.ConnectionResolve(ctx, "ghost")
		require.ErrorIs(t, err, herald.ErrNotFound)
	}
	require.Equal(t, int64(2), src.reads.Load())

	// After the TTL the change is seen.
	src.Put(&herald.Connection{Name: "r", Type: herald.DestinationRedis, URL: "redis://new"})
	at = at.Add(time.Minute)
	got, err := c.ConnectionResolve(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, "redis://new", got.URL)

	// A store error is not cached.
	src.fail.Store(true)
	_, err = c.ConnectionResolve(ctx, "other")
	require.ErrorIs(t, err, herald.ErrStoreUnavailable)
	src.fail.Store(false)
	_, err = c.ConnectionResolve(ctx, "other")
	require.ErrorIs(t, err, herald.ErrNotFound)

	// An unreadable URL is an error naming the key.
	_, err = c.ConnectionResolve(ctx, "sealed")
	require.ErrorContains(t, err, "--encryption-key")
	require.False(t, errors.Is(err, herald.ErrNotFound))
}
