package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/storetest"
)

// TestConformanceOrphaned runs the suite's leftover-delivery tests: the
// orphan is made by marking the subscription deleted behind the store's
// back, on a connection of its own.
func TestConformanceOrphaned(t *testing.T) {
	t.Parallel()
	var paths sync.Map // store.Store -> database file
	storetest.RunOrphaned(t, func(t *testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "herald.db")
		s := openPath(t, path)
		paths.Store(store.Store(s), path)
		return s
	}, func(t *testing.T, s store.Store, subID string, at time.Time) {
		path, ok := paths.Load(s)
		require.True(t, ok)
		db, err := sql.Open("sqlite3", path.(string)+"?_busy_timeout=5000")
		require.NoError(t, err)
		defer db.Close()
		_, err = db.Exec(`UPDATE subscriptions SET deleted_at = ? WHERE id = ?`, at.UnixMilli(), subID)
		require.NoError(t, err)
	})
}
