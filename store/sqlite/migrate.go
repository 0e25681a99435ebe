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
// transaction (store.MigrateApply: all pending migrations apply, or none;
// a database newer than the code is refused). The data directory's lock
// (Open) and the single writer keep it to one migration at a time.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrateTo(ctx, 0)
}

// migrateTo is Migrate stopping after version upTo (0: the newest).
func (s *Store) migrateTo(ctx context.Context, upTo int) error {
	migs, err := loadMigrations()
	if err != nil {
		return err
	}
	return store.MigrateApply(ctx, migrator{s: s}, &store.MigrateApplyParams{Migrations: migs, UpTo: upTo})
}

// migrator is the store as a store.MigrateBackend and, inside its
// transaction, a store.MigrateTx.
type migrator struct {
	s  *Store
	tx queryer
}

// MigrateTx runs fn in a durable write transaction with foreign keys off,
// and store.MigrateApply refuses the commit when the migrations left a
// row whose foreign key names no row (MigrationGuard): rebuilding a table
// that others reference (012) is only possible that way in SQLite, and the
// pragma cannot change inside a transaction, so it is set on the writer
// connection around it.
func (m migrator) MigrateTx(ctx context.Context, fn func(tx store.MigrateTx) error) error {
	m.s.writeMu.Lock()
	defer m.s.writeMu.Unlock()
	if _, err := m.s.db.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", unavailable(err))
	}
	defer func() { _, _ = m.s.db.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON") }()
	return m.s.writeTxLocked(ctx, "migrate", true, func(tx queryer) error {
		return fn(migrator{s: m.s, tx: tx})
	})
}

// legacyMigrationTable is where herald recorded SQLite's versions up to
// 012.
const legacyMigrationTable = "schema_migrations"

// MigrationTableEnsure creates store.MigrationTable, or renames the
// bookkeeping table of a database last migrated by herald 012 or older.
//
// The rename cannot be a migration: the version is read from the table
// before any migration runs, so under the new name alone an old database
// would read as empty and have 001 run over its schema. It happens here
// instead, in the migration transaction (SQLite's DDL is transactional, so
// it commits with the migrations it lets run, or not at all), and only
// while the old name is still a table: migration 013 leaves a view under
// that name (store/sqlite/migrations/013_migration_table.sql says why), so
// on every later start this is the CREATE IF NOT EXISTS alone.
func (m migrator) MigrationTableEnsure(ctx context.Context) error {
	var legacy, current int
	if err := m.tx.QueryRowContext(ctx, `SELECT
			COUNT(*) FILTER (WHERE name = ? AND type = 'table'),
			COUNT(*) FILTER (WHERE name = ?)
		FROM sqlite_master`, legacyMigrationTable, store.MigrationTable).Scan(&legacy, &current); err != nil {
		return err
	}
	if legacy > 0 {
		if current > 0 {
			return fmt.Errorf("both %s and %s exist: cannot tell which records the schema's version", legacyMigrationTable, store.MigrationTable)
		}
		_, err := m.tx.ExecContext(ctx, `ALTER TABLE `+legacyMigrationTable+` RENAME TO `+store.MigrationTable)
		return err
	}
	_, err := m.tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+store.MigrationTable+` (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`)
	return err
}

func (m migrator) MigrationVersionGet(ctx context.Context) (int, error) {
	var v int
	err := m.tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+store.MigrationTable).Scan(&v)
	return v, err
}

func (m migrator) MigrationExec(ctx context.Context, mig *store.Migration) error {
	_, err := m.tx.ExecContext(ctx, mig.SQL)
	return err
}

func (m migrator) MigrationRecord(ctx context.Context, mig *store.Migration) error {
	_, err := m.tx.ExecContext(ctx, `INSERT INTO `+store.MigrationTable+` (version, applied_at) VALUES (?, ?)`,
		mig.Version, time.Now().UnixMilli())
	return err
}

// MigrationGuard counts the foreign-key violations before the migrations
// and refuses new ones after: violations that were there before (a
// database once edited with foreign keys off may hold orphan attempts,
// which retention sweeps) are not the migrations' doing.
func (m migrator) MigrationGuard(ctx context.Context) (func(context.Context) error, error) {
	before, err := foreignKeyViolations(ctx, m.tx)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		after, err := foreignKeyViolations(ctx, m.tx)
		if err != nil {
			return err
		}
		for table, n := range after {
			if n > before[table] {
				return fmt.Errorf("migration left %d rows of %s without the row they reference", n-before[table], table)
			}
		}
		return nil
	}, nil
}

// foreignKeyViolations counts the rows of each table whose foreign key
// names no row (PRAGMA foreign_key_check).
func foreignKeyViolations(ctx context.Context, tx queryer) (map[string]int, error) {
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
