package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/sqlite"
	"github.com/heraldhq/herald/store/storetest"
)

func TestVAPID(t *testing.T) {
	t.Parallel()
	storetest.RunVAPID(t, func(t *testing.T) *storetest.SecretsBackend {
		path := filepath.Join(t.TempDir(), "herald.db")
		var cur *sqlite.Store
		t.Cleanup(func() {
			if cur != nil {
				_ = cur.Close()
			}
		})
		return &storetest.SecretsBackend{Open: func(keys *seal.Ring) store.Store {
			if cur != nil {
				require.NoError(t, cur.Close())
			}
			s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Keys: keys})
			require.NoError(t, err)
			require.NoError(t, s.Migrate(t.Context()))
			cur = s
			return s
		}}
	})
}
