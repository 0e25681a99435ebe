package testdb

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
	"github.com/heraldhq/herald/store/sqlite"
)

// DefaultURL is used when HERALD_TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the PostgreSQL URL tests use.
func URL() string {
	if u := os.Getenv("HERALD_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// SQLite returns a migrated store on a new file in t.TempDir(), copied
// from this process's migrated file (doc.go).
func SQLite(t testing.TB) store.Store {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "herald.db")
	sqliteCopy(t, path)
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// A no-op on the copy; it keeps "migrated" the store's own answer.
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate sqlite: %v", err)
	}
	return s
}

// PostgresSchema creates an empty schema of its own for this test in the
// server's test database and returns its name; it is dropped on cleanup.
// It skips (or fails under CI) when no server answers.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := adminConn(ctx, t)
	defer conn.Close(ctx)
	sweep(ctx, t, conn)
	schema := newName(prefixTest)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		adminDo(t, "DROP SCHEMA "+schema+" CASCADE")
	})
	return schema
}

// OpenPostgres opens a store on an existing schema (a second "node" on the
// same data) and migrates it.
func OpenPostgres(t testing.TB, schema string) store.Store {
	t.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Config{URL: URL(), Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate postgres: %v", err)
	}
	return s
}

// Postgres returns a migrated store on an empty schema no other test
// uses meanwhile, reused from an earlier test of the process when there is
// one (doc.go).
func Postgres(t testing.TB) store.Store {
	t.Helper()
	// Migrate is a no-op on a reused schema; calling it keeps "migrated"
	// the store's own answer, whatever its bookkeeping.
	return OpenPostgres(t, poolSchema(t))
}

// ForEach runs fn as parallel subtests "sqlite" and "postgres", each with a
// fresh store.
func ForEach(t *testing.T, fn func(t *testing.T, s store.Store)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, SQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, Postgres(t))
	})
}

// Backend names a store factory, for tests that need to open more than one
// store on the same data (two nodes) or reopen after a "restart".
type Backend struct {
	Name string
	// New returns a fresh store.
	New func(t testing.TB) store.Store
}

// Backends lists both factories.
func Backends() []Backend {
	return []Backend{{Name: "sqlite", New: SQLite}, {Name: "postgres", New: Postgres}}
}

// adminConn connects to the server's test database, skipping the test (or
// failing it under CI=true) when no server answers.
func adminConn(ctx context.Context, t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL required under CI=true but not reachable at %s: %v", URL(), err)
		}
		t.Skipf("SKIP: PostgreSQL not reachable at %s (set HERALD_TEST_DATABASE_URL): %v", URL(), err)
	}
	return conn
}

// adminDo runs one cleanup statement on a connection of its own (the
// test's context is over by then), logging a failure: a leftover is swept
// by a later run.
func adminDo(t testing.TB, sql string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, URL())
	if err != nil {
		t.Logf("%s: %v", sql, err)
		return
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Logf("%s: %v", sql, err)
	}
}
