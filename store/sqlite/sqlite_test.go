package sqlite_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/sqlite"
	"github.com/heraldhq/herald/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return testdb.SQLite(t) })
}

// openPath opens and migrates a store on path, closed on cleanup.
func openPath(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

func TestOpenLocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	first := openPath(t, path)

	// flock is per open file, so a second Open in this process is refused
	// exactly like one from another process.
	_, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	require.ErrorIs(t, err, sqlite.ErrLocked)
	require.ErrorContains(t, err, fmt.Sprintf("(pid %d)", os.Getpid()))
	require.ErrorContains(t, err, path)

	// Closing releases the directory.
	require.NoError(t, first.Close())
	second, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	require.NoError(t, err)
	require.NoError(t, second.Close())
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openPath(t, path)
	require.NoError(t, s.Migrate(t.Context()))
	require.NoError(t, s.Close())

	// Reopened, migrating again changes nothing either.
	s = openPath(t, path)
	require.NoError(t, s.Migrate(t.Context()))
	require.NoError(t, s.Close())
	db, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	defer db.Close()
	var rows, version int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*), MAX(version) FROM herald_migrations`).Scan(&rows, &version))
	require.Equal(t, sqlite.LatestSchemaVersion(), version)
	// Versions run 1..N without a gap (store/migrate.go): one row each.
	require.Equal(t, rows, version, "one row per migration, none applied twice")
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openPath(t, path)
	require.NoError(t, s.Close())

	// A newer herald migrated this file.
	db, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO herald_migrations (version, applied_at) VALUES (?, 0)`, sqlite.LatestSchemaVersion()+1)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, err = sqlite.Open(t.Context(), sqlite.Config{Path: path})
	require.NoError(t, err)
	defer s.Close()
	err = s.Migrate(t.Context())
	require.ErrorIs(t, err, sqlite.ErrSchemaTooNew)
	require.ErrorContains(t, err, strconv.Itoa(sqlite.LatestSchemaVersion()+1))
}

func TestOpenConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := sqlite.Open(t.Context(), sqlite.Config{})
	require.Error(t, err)
	_, err = sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(dir, "a.db"), Synchronous: "off"})
	require.ErrorContains(t, err, "Synchronous")

	for _, mode := range []string{"full", "normal", "NORMAL"} {
		s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(dir, mode+".db"), Synchronous: mode})
		require.NoError(t, err, mode)
		require.NoError(t, s.Migrate(t.Context()))
		require.NoError(t, s.Ping(t.Context()))
		require.NoError(t, s.Close())
	}
}

func TestClosedStoreUnavailable(t *testing.T) {
	t.Parallel()
	s := openPath(t, filepath.Join(t.TempDir(), "herald.db"))
	require.NoError(t, s.Close())
	err := s.Ping(t.Context())
	require.ErrorIs(t, err, herald.ErrStoreUnavailable)
	_, err = s.EventInsertMany(t.Context(), &store.EventInsertManyParams{Now: time.Now()})
	require.ErrorIs(t, err, herald.ErrStoreUnavailable)
}

// The background checkpointer copies the WAL into the database file with no
// further write: the 1.2 MB written here stays under both the writer's own
// threshold and SQLite's default one, so only the checkpointer can move it.
func TestBackgroundCheckpoint(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openPath(t, path)
	size := func() int64 {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		return fi.Size()
	}
	before := size()

	data := []byte(`{"blob":"` + strings.Repeat("x", 4000) + `"}`)
	events := make([]store.EventInsert, 300)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range events {
		events[i] = store.EventInsert{Event: &herald.Event{
			ID: herald.NewID(herald.PrefixEvent), Type: "ckpt.test", Data: data, CreatedAt: now,
		}}
	}
	_, err := s.EventInsertMany(t.Context(), &store.EventInsertManyParams{Events: events, Now: now})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return size() >= before+1_000_000 }, 10*time.Second, 10*time.Millisecond,
		"the database file did not grow: the WAL was not checkpointed")
}

// TestFileModes checks that the database, -wal and -shm files are 0600
// whatever the umask left, new or existing (issue 20: they were 0644).
func TestFileModes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	requireModes := func(t *testing.T) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s", p)
		}
	}
	s := openPath(t, path)
	require.NoError(t, s.APITokenCreate(t.Context(), &store.APITokenCreateParams{Hash: "aa", Now: time.Now()}))
	requireModes(t)
	require.NoError(t, s.Close())

	// A database created by an older herald (0644) is tightened on open.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if _, err := os.Stat(p); err == nil {
			require.NoError(t, os.Chmod(p, 0o644))
		}
	}
	s = openPath(t, path)
	require.NoError(t, s.APITokenCreate(t.Context(), &store.APITokenCreateParams{Hash: "bb", Now: time.Now()}))
	requireModes(t)
}

// TestMigrateEventTenantKey: migration 012 rebuilds events and deliveries
// of a version-11 database, keeping every row, the attempts' link to their
// delivery and the finished-state counters, and giving each delivery its
// event's tenant.
func TestMigrateEventTenantKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	db, err := sql.Open("sqlite3", path+"?_foreign_keys=on")
	require.NoError(t, err)
	db.SetMaxOpenConns(1) // the pragma below is per connection
	legacySchema(t, db, 11)
	for _, q := range []string{
		`INSERT INTO subscriptions (id, url, method, ordering, state, created_at, updated_at, all_tenants)
			VALUES ('sub_1', 'https://example.com/h', 'POST', 'none', 'enabled', 0, 0, 1)`,
		`INSERT INTO events (id, type, data, delivery_count, created_at, tenant) VALUES ('e1', 't', '{}', 1, 0, 'acme')`,
		`INSERT INTO events (id, type, data, delivery_count, created_at) VALUES ('e2', 't', '{}', 1, 0)`,
		`INSERT INTO deliveries (id, event_id, subscription_id, state, tier, next_attempt_at, created_at, updated_at)
			VALUES ('d1', 'e1', 'sub_1', 'pending', 0, 0, 0, 0)`,
		`INSERT INTO deliveries (id, event_id, subscription_id, state, tier, created_at, updated_at)
			VALUES ('d2', 'e2', 'sub_1', 'dead', 1, 0, 0)`,
		`INSERT INTO attempts (delivery_id, n, at, status, error) VALUES ('d2', 1, 0, 500, 'http_status')`,
		// An orphan attempt, as a database edited with foreign keys off may
		// hold: not the migration's doing, so it does not stop it.
		`PRAGMA foreign_keys = OFF`,
		`INSERT INTO attempts (delivery_id, n, at, status, error) VALUES ('gone', 1, 0, 500, 'http_status')`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, db.Close())

	s := openPath(t, path)
	d1, err := s.DeliveryGet(ctx, "d1")
	require.NoError(t, err)
	require.Equal(t, "acme", d1.Delivery.EventTenant)
	d2, err := s.DeliveryGet(ctx, "d2")
	require.NoError(t, err)
	require.Empty(t, d2.Delivery.EventTenant)
	require.Len(t, d2.Attempts, 1)
	st, err := s.StatsGet(ctx, &store.StatsGetParams{Tiers: 2, Now: time.UnixMilli(0)})
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Dead, "the counters were kept")

	ev, err := s.EventGet(ctx, &store.EventGetParams{ID: "e1", Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, ev.Deliveries, 1)
	res, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: time.UnixMilli(0), Events: []store.EventInsert{
		{Event: &herald.Event{ID: "e1", Type: "t", Tenant: "globex", CreatedAt: time.UnixMilli(0)}},
		{Event: &herald.Event{ID: "e1", Type: "t", Tenant: "acme", CreatedAt: time.UnixMilli(0)}},
	}})
	require.NoError(t, err)
	require.Equal(t, []store.EventInsertResult{{ID: "e1"}, {ID: "e1", Duplicate: true, DeliveryCount: 1}}, res)
}
