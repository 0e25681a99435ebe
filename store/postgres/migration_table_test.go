package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
)

// TestMigrateMigrationTable: a version-12 schema upgrades through 013
// (nothing to do on PostgreSQL, whose bookkeeping table always was
// store.MigrationTable), keeping its versions and rows.
func TestMigrateMigrationTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, schema := openAtVersion(ctx, t, 12)
	seedOld(ctx, t, schema, "m", 1, t0, "sub_m")

	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Migrate(ctx), "migrating again is a no-op")
	conn := schemaConn(ctx, t, schema)
	var rows, latest int
	var name string
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), max(version), (SELECT name FROM `+store.MigrationTable+` WHERE version = 13) FROM `+store.MigrationTable).Scan(&rows, &latest, &name))
	require.Equal(t, postgres.LatestSchemaVersion(), rows)
	require.Equal(t, postgres.LatestSchemaVersion(), latest)
	require.Equal(t, "013_migration_table.sql", name)
	_, err := s.SubscriptionGet(ctx, "sub_m")
	require.NoError(t, err, "the rows are kept")
}

// openAtVersion opens a store on a new schema migrated up to version, for
// a test that checks how a later migration treats the rows it seeds.
func openAtVersion(ctx context.Context, t *testing.T, version int) (*postgres.Store, string) {
	t.Helper()
	schema := testdb.PostgresSchema(t)
	s, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(), Schema: schema, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.MigrateTo(ctx, version))
	return s, schema
}
