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
	require.NoError(t, db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&rows, &version))
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
	_, err = db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, sqlite.LatestSchemaVersion()+1)
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
