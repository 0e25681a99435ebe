package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Schema migrations, one rule for every backend.
//
// A backend embeds its schema changes as files named NNN_name.sql in one
// directory, NNN being the version in decimal (leading zeros allowed). The
// versions of a backend run 1, 2, 3… with no gap and no number twice, and
// every backend ships every version: a version names the same step in all
// stores, and a backend with nothing to do for it ships a file that holds
// only a comment (SQLite's 005). A broken set is refused when it is loaded,
// before anything touches the database, so a gap left by a mistake (or by a
// merge) fails every start and every test instead of skipping a step on
// some databases.
//
// A database records the versions applied to it, in MigrationTable. One
// whose newest version is above the code's newest is refused with
// ErrSchemaTooNew: an older binary must not write to a schema it does not
// understand. Otherwise MigrateApply applies MigrationsPending in order, all
// of them in one transaction the backend opens under its own lock
// (PostgreSQL: an advisory lock, so nodes booting together migrate once;
// SQLite: the data directory's lock and its single writer), and records
// each version as it goes.

// Migration is one embedded schema step.
type Migration struct {
	// Version is the number the file name starts with (1, 2, …).
	Version int
	// Name is the file name, e.g. "002_ordering.sql".
	Name string
	// SQL is the file's content, run as one script.
	SQL string
}

// ErrSchemaTooNew is returned (wrapped, naming both versions) when the
// database was migrated by a newer herald. It is not transient: upgrade
// herald.
var ErrSchemaTooNew = errors.New("database schema is newer than this herald")

// ErrMigrationsInvalid is returned (wrapped, naming the file) when the
// embedded migrations break the rule above: a name that is not
// NNN_name.sql, a version 0, two files with one version, or a gap.
var ErrMigrationsInvalid = errors.New("invalid embedded migrations")

// MigrationsLoad reads the migrations in directory dir of fsys, in version
// order, and checks the rule (ErrMigrationsInvalid).
func MigrationsLoad(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		v, err := migrationVersion(name)
		if err != nil || e.IsDir() {
			return nil, fmt.Errorf("%w: %q is not named NNN_name.sql", ErrMigrationsInvalid, name)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no migration in %s", ErrMigrationsInvalid, dir)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if i > 0 && m.Version == out[i-1].Version {
			return nil, fmt.Errorf("%w: %s and %s have the same version %d", ErrMigrationsInvalid, out[i-1].Name, m.Name, m.Version)
		}
		if m.Version != i+1 {
			return nil, fmt.Errorf("%w: %s follows version %d: versions must run 1, 2, 3… without gaps", ErrMigrationsInvalid, m.Name, i)
		}
	}
	return out, nil
}

// migrationVersion parses the NNN of "NNN_name.sql": decimal digits only,
// at least 1.
func migrationVersion(name string) (int, error) {
	num, rest, ok := strings.Cut(name, "_")
	if !ok || rest == ".sql" || !strings.HasSuffix(rest, ".sql") || num == "" || strings.Trim(num, "0123456789") != "" {
		return 0, errors.New("bad name")
	}
	v, err := strconv.Atoi(num)
	if err != nil || v < 1 {
		return 0, errors.New("bad version")
	}
	return v, nil
}

// MigrationsPending returns the migrations (as MigrationsLoad returned
// them) that a database at version current (0: never migrated) still needs,
// in order, or ErrSchemaTooNew when current is above the newest one.
func MigrationsPending(migrations []Migration, current int) ([]Migration, error) {
	latest := 0
	if len(migrations) > 0 {
		latest = migrations[len(migrations)-1].Version
	}
	if current > latest {
		return nil, fmt.Errorf("%w: it is at version %d, this herald knows up to %d: upgrade herald", ErrSchemaTooNew, current, latest)
	}
	for i, m := range migrations {
		if m.Version > current {
			return migrations[i:], nil
		}
	}
	return nil, nil
}

// MigrationTable is the bookkeeping table of every store: one row per
// applied version. (SQLite's was schema_migrations up to version 12; its
// MigrationTableEnsure renames it, see store/sqlite/migrate.go.)
const MigrationTable = "herald_migrations"

// MigrateBackend is what MigrateApply needs of a store: its migration
// transaction.
type MigrateBackend interface {
	// MigrateTx runs fn in one transaction under the store's migration
	// lock, committing when fn returns nil.
	MigrateTx(ctx context.Context, fn func(tx MigrateTx) error) error
}

// MigrateTx is a store's open migration transaction, one statement per
// method.
type MigrateTx interface {
	// MigrationTableEnsure creates MigrationTable when it does not exist.
	// It runs before the version is read, so it is also where a store
	// carries an older bookkeeping table over.
	MigrationTableEnsure(ctx context.Context) error
	// MigrationVersionGet returns the newest version recorded (0: none).
	MigrationVersionGet(ctx context.Context) (int, error)
	// MigrationExec runs m's script.
	MigrationExec(ctx context.Context, m *Migration) error
	// MigrationRecord records m as applied.
	MigrationRecord(ctx context.Context, m *Migration) error
	// MigrationGuard is called when migrations are pending, before the
	// first runs. The check it returns (nil: none) is called after the
	// last, before the commit; its error refuses the whole migration.
	// SQLite uses it to refuse migrations that leave rows breaking a
	// foreign key (they run with foreign keys off).
	MigrationGuard(ctx context.Context) (check func(ctx context.Context) error, err error)
}

// MigrateApplyParams are the inputs of MigrateApply.
type MigrateApplyParams struct {
	// Migrations are every migration of the store, as MigrationsLoad
	// returned them.
	Migrations []Migration
	// UpTo, when > 0, stops after that version (tests use it to build an
	// older schema and check that a migration carries its rows over).
	UpTo int
}

// MigrateApply brings a store's schema up to date (the rule at the top of
// this file): in one transaction of b, it ensures the bookkeeping table,
// reads the database's version, refuses a newer one (ErrSchemaTooNew), and
// runs and records every pending migration in order. A failure rolls back
// every migration of the call.
func MigrateApply(ctx context.Context, b MigrateBackend, params *MigrateApplyParams) error {
	return b.MigrateTx(ctx, func(tx MigrateTx) error {
		if err := tx.MigrationTableEnsure(ctx); err != nil {
			return err
		}
		current, err := tx.MigrationVersionGet(ctx)
		if err != nil {
			return err
		}
		pending, err := MigrationsPending(params.Migrations, current)
		if err != nil || len(pending) == 0 {
			return err
		}
		check, err := tx.MigrationGuard(ctx)
		if err != nil {
			return err
		}
		for i := range pending {
			m := &pending[i]
			if params.UpTo > 0 && m.Version > params.UpTo {
				break
			}
			if err := tx.MigrationExec(ctx, m); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if err := tx.MigrationRecord(ctx, m); err != nil {
				return err
			}
		}
		if check == nil {
			return nil
		}
		return check(ctx)
	})
}
