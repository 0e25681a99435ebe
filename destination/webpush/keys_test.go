package webpushdest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// TestStoreKeys: the first node generates the key, others read it; a
// rotation reaches the public key at once and the signing key within
// KeyRefresh.
func TestStoreKeys(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t).(store.VAPIDStore)
	ctx := t.Context()
	a, b := NewStoreKeys(s), NewStoreKeys(s)
	ka, err := a.Ensure(ctx)
	require.NoError(t, err)
	kb, err := b.VAPIDKey(ctx)
	require.NoError(t, err)
	require.Equal(t, ka.Public, kb.Public)
	pub, err := b.PublicKey(ctx)
	require.NoError(t, err)
	require.Equal(t, ka.Public, pub)

	now := time.Now()
	b.now = func() time.Time { return now }
	_, err = b.VAPIDKey(ctx)
	require.NoError(t, err)
	rotated, err := a.Rotate(ctx)
	require.NoError(t, err)
	require.NotEqual(t, ka.Public, rotated.Public)
	pub, err = b.PublicKey(ctx)
	require.NoError(t, err)
	require.Equal(t, rotated.Public, pub)

	c := NewStoreKeys(s)
	c.now = func() time.Time { return now }
	_, err = c.VAPIDKey(ctx)
	require.NoError(t, err)
	_, err = a.Rotate(ctx)
	require.NoError(t, err)
	cached, err := c.VAPIDKey(ctx)
	require.NoError(t, err)
	require.Equal(t, rotated.Public, cached.Public, "cached until KeyRefresh")
	c.now = func() time.Time { return now.Add(KeyRefresh) }
	fresh, err := c.VAPIDKey(ctx)
	require.NoError(t, err)
	require.NotEqual(t, rotated.Public, fresh.Public)

	// Halves that do not belong together are refused.
	priv, _, err := GenerateVAPIDKey()
	require.NoError(t, err)
	_, err = ParseVAPIDKey(priv, rotated.Public)
	require.Error(t, err)
}
