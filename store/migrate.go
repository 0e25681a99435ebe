package store

import (
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
// A database records the versions applied to it. One whose newest version
// is above the code's newest is refused with ErrSchemaTooNew: an older
// binary must not write to a schema it does not understand. Otherwise the
// backend applies MigrationsPending in order, all of them in one
// transaction, under its own lock (PostgreSQL: an advisory lock, so nodes
// booting together migrate once; SQLite: the data directory's lock and its
// single writer), and records each version as it goes.

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
