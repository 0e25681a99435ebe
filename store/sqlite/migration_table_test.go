package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/sqlite"
)

// legacyVersion reads a database's version the way herald 012 and older
// did, statement for statement: they created schema_migrations if absent
// and took its newest version.
func legacyVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			applied_at INTEGER NOT NULL
		)`)
	require.NoError(t, err)
	var v int
	require.NoError(t, db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v))
	return v
}

// legacySchema brings db to the given version as herald 012 and older
// left a database: the migrations up to it run as plain scripts, and their
// versions recorded in schema_migrations.
func legacySchema(t *testing.T, db *sql.DB, version int) {
	t.Helper()
	migs, err := store.MigrationsLoad(os.DirFS("."), "migrations")
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`)
	require.NoError(t, err)
	for _, m := range migs[:version] {
		_, err = db.Exec(m.SQL)
		require.NoError(t, err, m.Name)
		_, err = db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, m.Version)
		require.NoError(t, err)
	}
}

// version12 writes a database as herald 012 left it, with a subscription.
func version12(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	defer db.Close()
	legacySchema(t, db, 12)
	_, err = db.Exec(`INSERT INTO subscriptions (id, url, method, ordering, state, created_at, updated_at)
		VALUES ('sub_1', 'https://example.com/h', 'POST', 'none', 'enabled', 0, 0)`)
	require.NoError(t, err)
}

// TestMigrateMigrationTable: a version-12 database (bookkeeping in
// schema_migrations) upgrades on its first start: its versions move to
// store.MigrationTable, only 013 and later run, its rows stay, and a herald
// 012 started on it afterwards reads version 13 or later and so refuses it as
// too new.
func TestMigrateMigrationTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	version12(t, path)
	require.Equal(t, 12, legacyVersion(t, path))

	s := openPath(t, path)
	_, err := s.SubscriptionGet(ctx, "sub_1")
	require.NoError(t, err, "the rows are kept")
	require.NoError(t, s.Migrate(ctx), "migrating again is a no-op")
	require.NoError(t, s.Close())

	db, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	defer db.Close()
	var rows, latest int
	var applied13 int64
	require.NoError(t, db.QueryRow(`SELECT COUNT(*), MAX(version), MAX(applied_at) FROM `+store.MigrationTable).
		Scan(&rows, &latest, &applied13))
	require.Equal(t, sqlite.LatestSchemaVersion(), rows, "versions 1–12 carried over, 13 and later added once")
	require.Equal(t, sqlite.LatestSchemaVersion(), latest)
	require.Greater(t, applied13, int64(0), "only 013 and later ran now (the old rows say 0)")
	var kind string
	require.NoError(t, db.QueryRow(`SELECT type FROM sqlite_master WHERE name = 'schema_migrations'`).Scan(&kind))
	require.Equal(t, "view", kind)

	// What herald 012 would read: the new version, which it refuses
	// (store.ErrSchemaTooNew) instead of migrating from 0.
	require.Equal(t, sqlite.LatestSchemaVersion(), legacyVersion(t, path))

	// A new database has the same bookkeeping.
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	require.NoError(t, openPath(t, fresh).Close())
	require.Equal(t, sqlite.LatestSchemaVersion(), legacyVersion(t, fresh))
}

// TestMigrateMigrationTableBoth: a database holding both bookkeeping tables
// is refused (which one tells its version is unknown), and nothing changes.
func TestMigrateMigrationTableBoth(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	version12(t, path)
	db, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE ` + store.MigrationTable + ` (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	require.NoError(t, err)
	defer s.Close()
	require.ErrorContains(t, s.Migrate(t.Context()), "both schema_migrations and herald_migrations exist")
	require.NoError(t, s.Close())
	require.Equal(t, 12, legacyVersion(t, path))
}
