package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/storetest"
)

// rawConn connects to schema outside the store, for what no store method
// does.
func rawConn(t *testing.T, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(testdb.URL())
	require.NoError(t, err)
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

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
		_, err := rawConn(t, schema.(string)).Exec(t.Context(),
			`UPDATE subscriptions SET deleted_at = $2 WHERE id = $1`, subID, at)
		require.NoError(t, err)
	})
}
