package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/store"
)

func testAPIToken(t *testing.T, newStore NewStoreFunc) {
	t.Run("CreateExistsCount", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		const hashA, hashB = "aa11", "bb22"

		n, err := b.store.APITokenCount(b.ctx)
		require.NoError(t, err)
		require.Zero(t, n, "a first start has no tokens")
		ok, err := b.store.APITokenExists(b.ctx, hashA)
		require.NoError(t, err)
		require.False(t, ok)

		require.NoError(t, b.store.APITokenCreate(b.ctx, &store.APITokenCreateParams{Hash: hashA, Now: now}))
		ok, err = b.store.APITokenExists(b.ctx, hashA)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.APITokenExists(b.ctx, hashB)
		require.NoError(t, err)
		require.False(t, ok)
		n, err = b.store.APITokenCount(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		require.NoError(t, b.store.APITokenCreate(b.ctx, &store.APITokenCreateParams{Hash: hashB, Now: now}))
		n, err = b.store.APITokenCount(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	})
}
