package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	webpushdest "github.com/heraldhq/herald/destination/webpush"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// TestvapidKeys: the first node generates the key, others read it; a
// rotation reaches the public key at once and the signing key within
// vapidKeyRefresh.
func TestVAPIDKeys(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t).(store.VAPIDStore)
	ctx := t.Context()
	a, b := newVAPIDKeys(s), newVAPIDKeys(s)
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

	c := newVAPIDKeys(s)
	c.now = func() time.Time { return now }
	_, err = c.VAPIDKey(ctx)
	require.NoError(t, err)
	_, err = a.Rotate(ctx)
	require.NoError(t, err)
	cached, err := c.VAPIDKey(ctx)
	require.NoError(t, err)
	require.Equal(t, rotated.Public, cached.Public, "cached until vapidKeyRefresh")
	c.now = func() time.Time { return now.Add(vapidKeyRefresh) }
	fresh, err := c.VAPIDKey(ctx)
	require.NoError(t, err)
	require.NotEqual(t, rotated.Public, fresh.Public)

	// Halves that do not belong together are refused.
	priv, _, err := webpushdest.GenerateVAPIDKey()
	require.NoError(t, err)
	_, err = webpushdest.ParseVAPIDKey(priv, rotated.Public)
	require.Error(t, err)
}
