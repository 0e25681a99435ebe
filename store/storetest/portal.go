package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func testPortalLink(t *testing.T, newStore NewStoreFunc) {
	create := func(t *testing.T, b *bundle, id, hash string, ttl time.Duration, theme json.RawMessage) {
		t.Helper()
		require.NoError(t, b.store.PortalLinkCreate(b.ctx, &store.PortalLinkCreateParams{
			ID: id, Hash: hash, Tenant: "acme", Theme: theme, ExpiresAt: now.Add(ttl), Now: now,
		}))
	}

	t.Run("ConsumeOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		create(t, b, "pl_1", "h1", time.Hour, json.RawMessage(`{"accent":"#112233","name":"Acme"}`))

		at := now.Add(time.Minute)
		l, err := b.store.PortalLinkConsume(b.ctx, &store.PortalLinkConsumeParams{Hash: "h1", Now: at})
		require.NoError(t, err)
		require.Equal(t, "pl_1", l.ID)
		require.Equal(t, "h1", l.Hash)
		require.Equal(t, "acme", l.Tenant)
		require.JSONEq(t, `{"accent":"#112233","name":"Acme"}`, string(l.Theme))
		require.Equal(t, now, l.CreatedAt)
		require.Equal(t, now.Add(time.Hour), l.ExpiresAt)
		require.NotNil(t, l.UsedAt)
		require.Equal(t, at, *l.UsedAt)

		_, err = b.store.PortalLinkConsume(b.ctx, &store.PortalLinkConsumeParams{Hash: "h1", Now: at})
		require.ErrorIs(t, err, herald.ErrNotFound, "a used link cannot be consumed again")
		_, err = b.store.PortalLinkConsume(b.ctx, &store.PortalLinkConsumeParams{Hash: "nope", Now: at})
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	// Get reads a link by id, before and after its exchange (a portal tab
	// continuing its browser's session reads the theme there).
	t.Run("Get", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		create(t, b, "pl_1", "h1", time.Hour, json.RawMessage(`{"name":"Acme"}`))
		create(t, b, "pl_2", "h2", time.Hour, nil)
		l, err := b.store.PortalLinkGet(b.ctx, "pl_1")
		require.NoError(t, err)
		require.Equal(t, "pl_1", l.ID)
		require.Equal(t, "h1", l.Hash)
		require.Equal(t, "acme", l.Tenant)
		require.JSONEq(t, `{"name":"Acme"}`, string(l.Theme))
		require.Equal(t, now, l.CreatedAt)
		require.Equal(t, now.Add(time.Hour), l.ExpiresAt)
		require.Nil(t, l.UsedAt)

		at := now.Add(time.Minute)
		_, err = b.store.PortalLinkConsume(b.ctx, &store.PortalLinkConsumeParams{Hash: "h1", Now: at})
		require.NoError(t, err)
		l, err = b.store.PortalLinkGet(b.ctx, "pl_1")
		require.NoError(t, err)
		require.NotNil(t, l.UsedAt)
		require.Equal(t, at, *l.UsedAt)

		l, err = b.store.PortalLinkGet(b.ctx, "pl_2")
		require.NoError(t, err)
		require.Nil(t, l.Theme)
		_, err = b.store.PortalLinkGet(b.ctx, "pl_nope")
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("NoTheme", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		create(t, b, "pl_1", "h1", time.Hour, nil)
		l, err := b.store.PortalLinkConsume(b.ctx, &store.PortalLinkConsumeParams{Hash: "h1", Now: now})
		require.NoError(t, err)
		require.Nil(t, l.Theme)
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		create(t, b, "pl_1", "h1", time.Hour, nil)
		// Expiry is exclusive: at expires_at the link is already dead.
		_, err := b.store.PortalLinkConsume(b.ctx, &store.PortalLinkConsumeParams{Hash: "h1", Now: now.Add(time.Hour)})
		require.ErrorIs(t, err, herald.ErrNotFound)
		// A refused consume changed nothing: one millisecond before expiry works.
		_, err = b.store.PortalLinkConsume(b.ctx, &store.PortalLinkConsumeParams{Hash: "h1", Now: now.Add(time.Hour - time.Millisecond)})
		require.NoError(t, err)
	})

	t.Run("ConcurrentConsumeOneWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		create(t, b, "pl_1", "h1", time.Hour, nil)
		const n = 8
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins int
		)
		for range n {
			wg.Go(func() {
				_, err := b.store.PortalLinkConsume(b.ctx, &store.PortalLinkConsumeParams{Hash: "h1", Now: now})
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
					return
				}
				if !errors.Is(err, herald.ErrNotFound) {
					t.Errorf("consume: %v", err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, 1, wins)
	})

	t.Run("CreateDeletesLongExpired", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		create(t, b, "pl_old", "old", time.Hour, nil)
		// A day and an hour later the old link is past its retention.
		later := now.Add(time.Hour + store.PortalLinkRetention + time.Millisecond)
		require.NoError(t, b.store.PortalLinkCreate(b.ctx, &store.PortalLinkCreateParams{
			ID: "pl_new", Hash: "new", Tenant: "acme", ExpiresAt: later.Add(time.Hour), Now: later,
		}))
		// Re-creating the old hash only works if its row was deleted.
		require.NoError(t, b.store.PortalLinkCreate(b.ctx, &store.PortalLinkCreateParams{
			ID: "pl_old", Hash: "old", Tenant: "acme", ExpiresAt: later.Add(time.Hour), Now: later,
		}))
	})
}
