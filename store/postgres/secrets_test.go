package postgres_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
	"github.com/heraldhq/herald/store/storetest"
)

func TestSecrets(t *testing.T) {
	t.Parallel()
	storetest.RunSecrets(t, func(t *testing.T) *storetest.SecretsBackend {
		schema := testdb.PostgresSchema(t)
		var cur *postgres.Store
		t.Cleanup(func() {
			if cur != nil {
				cur.Close()
			}
		})
		return &storetest.SecretsBackend{
			Open: func(keys *seal.Ring) store.Store {
				if cur != nil {
					cur.Close()
				}
				s, err := postgres.Open(t.Context(), postgres.Config{URL: testdb.URL(), Schema: schema, MaxConns: 4, Keys: keys})
				require.NoError(t, err)
				require.NoError(t, s.Migrate(t.Context()))
				cur = s
				return s
			},
			RawSecrets: func() []string {
				raw, err := cur.RawSecrets(t.Context())
				require.NoError(t, err)
				return raw
			},
			RawConnectionURLs: func() []string {
				raw, err := cur.RawConnectionURLs(t.Context())
				require.NoError(t, err)
				return raw
			},
		}
	})
}

// TestSecretResealCompareAndSet: a secret changed between SecretReseal's
// read and its rewrite is left as the other writer set it (counted as
// raced), never overwritten with the re-encrypted old value. Only
// PostgreSQL can interleave there: SQLite's reseal holds the one writer
// from read to rewrite.
func TestSecretResealCompareAndSet(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := testdb.PostgresSchema(t)
	open := func(keys *seal.Ring) *postgres.Store {
		s, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(), Schema: schema, MaxConns: 4, Keys: keys})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		require.NoError(t, s.Migrate(ctx))
		return s
	}
	ring := func(keys ...byte) *seal.Ring {
		var raw [][]byte
		for _, k := range keys {
			raw = append(raw, bytes.Repeat([]byte{k}, seal.KeySize))
		}
		r, err := seal.NewRing(raw...)
		require.NoError(t, err)
		return r
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := open(ring(1))
	sub := &herald.Subscription{ID: "sub_cas", URL: "https://example.com/h", Method: "POST", Ordering: herald.OrderingNone,
		State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now}
	_, err := old.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: "whsec_old", Now: now})
	require.NoError(t, err)

	// The other writer seals a new value under the new key meanwhile.
	s := open(ring(2, 1))
	theirs, err := ring(2, 1).Seal("whsec_theirs", store.SecretAAD(sub.ID))
	require.NoError(t, err)
	s.SetResealHook(func(ctx context.Context) { require.NoError(t, s.SetRawSecret(ctx, sub.ID, theirs)) })
	res, err := s.SecretReseal(ctx, &store.SecretResealParams{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Raced)
	require.Zero(t, res.Resealed)
	secs, err := s.SubscriptionSecretList(ctx, sub.ID)
	require.NoError(t, err)
	require.Len(t, secs, 1)
	require.Equal(t, "whsec_theirs", secs[0].Value)
}
