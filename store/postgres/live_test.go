package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/storetest"
)

// TestConformanceOrphaned runs the suite's leftover-delivery tests: the
// orphan is made by marking the subscription deleted behind the store's
// back.
func TestConformanceOrphaned(t *testing.T) {
	t.Parallel()
	var schemas sync.Map // store.Store -> schema
	storetest.RunOrphaned(t, func(t *testing.T) store.Store {
		schema := testdb.PostgresSchema(t)
		s := testdb.OpenPostgres(t, schema)
		schemas.Store(s, schema)
		return s
	}, func(t *testing.T, s store.Store, subID string, at time.Time) {
		schema, ok := schemas.Load(s)
		require.True(t, ok)
		_, err := schemaConn(t.Context(), t, schema.(string)).Exec(t.Context(),
			`UPDATE subscriptions SET deleted_at = $2 WHERE id = $1`, subID, at)
		require.NoError(t, err)
	})
}
