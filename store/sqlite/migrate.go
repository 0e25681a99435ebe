package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/heraldhq/herald/store"
)

// migrations are applied in the order of their numeric prefix
// ("001_init.sql") under the rule of store/migrate.go (no gap, no number
// twice, the same numbers as PostgreSQL's); a number, once released, never
// changes meaning.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrSchemaTooNew is returned (wrapped) by Migrate when the database was
// migrated by a newer herald. It is store.ErrSchemaTooNew.
var ErrSchemaTooNew = store.ErrSchemaTooNew

func loadMigrations() ([]store.Migration, error) {
	ms, err := store.MigrationsLoad(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return ms, nil
}

// LatestSchemaVersion is the newest schema version this code knows.
func LatestSchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// Migrate brings the schema to the newest embedded version in one
// transaction (all pending migrations apply, or none). A database whose
// version is newer than the code is refused: an older binary must not write
// to a schema it does not understand. The data directory's lock (Open) and
// the single writer keep it to one migration at a time.
//
// Foreign keys are off while migrating, and the commit is refused when the
// migrations left a row whose foreign key names no row: rebuilding a
// table that others reference (012) is only possible that way in SQLite,
// and the pragma cannot change inside a transaction, so it is set on the
// writer connection around it.
func (s *Store) Migrate(ctx context.Context) error {
	migs, err := loadMigrations()
	if err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.db.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", unavailable(err))
	}
	defer func() { _, _ = s.db.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON") }()
	return s.writeTxLocked(ctx, "migrate", true, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			applied_at INTEGER NOT NULL
		)`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return err
		}
		pending, err := store.MigrationsPending(migs, current)
		if err != nil {
			return err
		}
		// Violations that were there before (a database once edited with
		// foreign keys off may hold orphan attempts, which retention
		// sweeps) are not the migration's doing.
		var before map[string]int
		if len(pending) > 0 {
			if before, err = foreignKeyViolations(ctx, tx); err != nil {
				return err
			}
		}
		for _, m := range pending {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
				m.Version, time.Now().UnixMilli()); err != nil {
				return err
			}
		}
		if len(pending) == 0 {
			return nil
		}
		after, err := foreignKeyViolations(ctx, tx)
		if err != nil {
			return err
		}
		for table, n := range after {
			if n > before[table] {
				return fmt.Errorf("migration left %d rows of %s without the row they reference", n-before[table], table)
			}
		}
		return nil
	})
}

// foreignKeyViolations counts the rows of each table whose foreign key
// names no row (PRAGMA foreign_key_check).
func foreignKeyViolations(ctx context.Context, tx *sql.Tx) (map[string]int, error) {
	rows, err := tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fk int
		if err := rows.Scan(&table, &rowid, &parent, &fk); err != nil {
			return nil, err
		}
		out[table]++
	}
	return out, rows.Err()
}
