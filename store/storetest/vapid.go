package storetest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// RunVAPID runs the VAPID key suite (store/vapid.go) on stores the backend
// opens; it needs only Open.
func RunVAPID(t *testing.T, newBackend func(t *testing.T) *SecretsBackend) {
	t.Helper()
	for _, tt := range []struct {
		name string
		fn   func(t *testing.T, be *SecretsBackend)
	}{
		{"EnsureFirstWins", testVAPIDEnsureFirstWins},
		{"EnsureConcurrent", testVAPIDEnsureConcurrent},
		{"Replace", testVAPIDReplace},
		{"SealedAtRest", testVAPIDSealedAtRest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newBackend(t))
		})
	}
}

func vapidStore(t *testing.T, s store.Store) store.VAPIDStore {
	t.Helper()
	v, ok := s.(store.VAPIDStore)
	require.True(t, ok, "the store does not implement store.VAPIDStore")
	return v
}

// Distinct stand-ins for keys: the store keeps strings, it does not parse
// them.
func vapidParams(n int, now time.Time) *store.VAPIDKeyParams {
	return &store.VAPIDKeyParams{
		PrivateKey: strings.Repeat(string(rune('a'+n)), 43),
		PublicKey:  "B" + strings.Repeat(string(rune('a'+n)), 86),
		Now:        now,
	}
}

func testVAPIDEnsureFirstWins(t *testing.T, be *SecretsBackend) {
	ctx := t.Context()
	s := vapidStore(t, be.Open(nil))
	_, err := s.VAPIDKeyGet(ctx)
	require.ErrorIs(t, err, herald.ErrNotFound)

	now := time.Now().UTC().Truncate(time.Millisecond)
	first, err := s.VAPIDKeyEnsure(ctx, vapidParams(0, now))
	require.NoError(t, err)
	require.Equal(t, vapidParams(0, now).PrivateKey, first.PrivateKey)
	require.Equal(t, vapidParams(0, now).PublicKey, first.PublicKey)
	require.True(t, first.CreatedAt.Equal(now), "%v != %v", first.CreatedAt, now)

	// A second node proposing its own key gets the stored one.
	again, err := s.VAPIDKeyEnsure(ctx, vapidParams(1, now.Add(time.Second)))
	require.NoError(t, err)
	require.Equal(t, first.PrivateKey, again.PrivateKey)
	require.Equal(t, first.PublicKey, again.PublicKey)
	require.True(t, again.CreatedAt.Equal(now))

	got, err := s.VAPIDKeyGet(ctx)
	require.NoError(t, err)
	require.Equal(t, first.PublicKey, got.PublicKey)
	require.Equal(t, first.PrivateKey, got.PrivateKey)
}

// Nodes starting together all end up with one key.
func testVAPIDEnsureConcurrent(t *testing.T, be *SecretsBackend) {
	ctx := t.Context()
	s := vapidStore(t, be.Open(testRing(t, 1)))
	const n = 8
	keys := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k, err := s.VAPIDKeyEnsure(ctx, vapidParams(i, time.Now()))
			if err == nil {
				keys[i] = k.PublicKey
			}
		})
	}
	wg.Wait()
	for i := range n {
		require.NotEmpty(t, keys[i], "ensure %d failed", i)
		require.Equal(t, keys[0], keys[i])
	}
}

func testVAPIDReplace(t *testing.T, be *SecretsBackend) {
	ctx := t.Context()
	s := vapidStore(t, be.Open(testRing(t, 1)))
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, err := s.VAPIDKeyEnsure(ctx, vapidParams(0, now))
	require.NoError(t, err)
	later := now.Add(time.Hour)
	rotated, err := s.VAPIDKeyReplace(ctx, vapidParams(2, later))
	require.NoError(t, err)
	require.Equal(t, vapidParams(2, later).PublicKey, rotated.PublicKey)
	for _, get := range []func() (*store.VAPIDKey, error){
		func() (*store.VAPIDKey, error) { return s.VAPIDKeyGet(ctx) },
		func() (*store.VAPIDKey, error) { return s.VAPIDKeyEnsure(ctx, vapidParams(3, later)) },
	} {
		k, err := get()
		require.NoError(t, err)
		require.Equal(t, vapidParams(2, later).PrivateKey, k.PrivateKey)
		require.Equal(t, vapidParams(2, later).PublicKey, k.PublicKey)
		require.True(t, k.CreatedAt.Equal(later))
	}
	// Replace on an empty table stores.
	s2 := vapidStore(t, be.Open(nil))
	_, err = s2.VAPIDKeyReplace(ctx, vapidParams(4, later))
	require.NoError(t, err)
}

// The private key is sealed with the ring: without the key it does not
// open, and Ensure moves it to the ring's first key so an old key can be
// dropped after a rotation.
func testVAPIDSealedAtRest(t *testing.T, be *SecretsBackend) {
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	s := vapidStore(t, be.Open(testRing(t, 1)))
	_, err := s.VAPIDKeyEnsure(ctx, vapidParams(0, now))
	require.NoError(t, err)

	s = vapidStore(t, be.Open(nil))
	_, err = s.VAPIDKeyGet(ctx)
	require.Error(t, err, "a sealed private key read without a key")
	require.Contains(t, err.Error(), "VAPID private key")

	s = vapidStore(t, be.Open(testRing(t, 2)))
	_, err = s.VAPIDKeyGet(ctx)
	require.Error(t, err, "a private key sealed under a key the ring lacks")

	// New key first, old second: Ensure reads with the old and re-seals.
	s = vapidStore(t, be.Open(testRing(t, 2, 1)))
	k, err := s.VAPIDKeyEnsure(ctx, vapidParams(1, now))
	require.NoError(t, err)
	require.Equal(t, vapidParams(0, now).PrivateKey, k.PrivateKey)

	s = vapidStore(t, be.Open(testRing(t, 2)))
	k, err = s.VAPIDKeyGet(ctx)
	require.NoError(t, err)
	require.Equal(t, vapidParams(0, now).PrivateKey, k.PrivateKey)
}
