package store_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
	"github.com/heraldhq/herald/store/sqlite"
)

func TestMigrationsLoad(t *testing.T) {
	t.Parallel()
	files := func(names ...string) fstest.MapFS {
		fsys := fstest.MapFS{}
		for _, n := range names {
			fsys["m/"+n] = &fstest.MapFile{Data: []byte("-- " + n)}
		}
		return fsys
	}
	for _, tt := range []struct {
		name    string
		files   []string
		want    []int  // versions, when loading succeeds
		wantErr string // part of the error otherwise
	}{
		{name: "InOrder", files: []string{"001_init.sql", "002_b.sql", "003_c.sql"}, want: []int{1, 2, 3}},
		{name: "SortedByNumberNotName", files: []string{"010_j.sql", "009_i.sql", "1_a.sql", "02_b.sql", "003_c.sql",
			"004_d.sql", "005_e.sql", "006_f.sql", "007_g.sql", "008_h.sql"}, want: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{name: "Gap", files: []string{"001_init.sql", "002_b.sql", "004_d.sql"}, wantErr: "004_d.sql follows version 2"},
		{name: "GapAtStart", files: []string{"002_b.sql", "003_c.sql"}, wantErr: "002_b.sql follows version 0"},
		{name: "Duplicate", files: []string{"001_init.sql", "002_b.sql", "002_other.sql"}, wantErr: "same version 2"},
		{name: "DuplicateBySpelling", files: []string{"001_init.sql", "2_b.sql", "002_b.sql"}, wantErr: "same version 2"},
		{name: "Zero", files: []string{"000_init.sql", "001_b.sql"}, wantErr: `"000_init.sql" is not named`},
		{name: "NoNumber", files: []string{"001_init.sql", "init.sql"}, wantErr: `"init.sql" is not named`},
		{name: "SignedNumber", files: []string{"001_init.sql", "+2_b.sql"}, wantErr: `"+2_b.sql" is not named`},
		{name: "NoName", files: []string{"001_.sql"}, wantErr: `"001_.sql" is not named`},
		{name: "NotSQL", files: []string{"001_init.sql", "002_b.txt"}, wantErr: `"002_b.txt" is not named`},
		{name: "Empty", files: nil, wantErr: "no migration"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := files(tt.files...)
			if len(tt.files) == 0 {
				fsys["m"] = &fstest.MapFile{Mode: fs.ModeDir | 0o755} // an empty directory
			}
			ms, err := store.MigrationsLoad(fsys, "m")
			if tt.wantErr != "" {
				require.ErrorIs(t, err, store.ErrMigrationsInvalid)
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, ms)
				return
			}
			require.NoError(t, err)
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
				require.Equal(t, "-- "+m.Name, m.SQL)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestMigrationsPending(t *testing.T) {
	t.Parallel()
	ms := []store.Migration{{Version: 1, Name: "001_a.sql"}, {Version: 2, Name: "002_b.sql"}, {Version: 3, Name: "003_c.sql"}}
	versions := func(ms []store.Migration) []int {
		var out []int
		for _, m := range ms {
			out = append(out, m.Version)
		}
		return out
	}
	for _, tt := range []struct {
		current int
		want    []int
	}{
		{0, []int{1, 2, 3}},
		{1, []int{2, 3}},
		{2, []int{3}},
		{3, nil},
	} {
		got, err := store.MigrationsPending(ms, tt.current)
		require.NoError(t, err, "at version %d", tt.current)
		require.Equal(t, tt.want, versions(got), "at version %d", tt.current)
	}

	// A newer herald migrated this database: refused, naming both versions.
	_, err := store.MigrationsPending(ms, 4)
	require.ErrorIs(t, err, store.ErrSchemaTooNew)
	require.ErrorContains(t, err, "version 4")
	require.ErrorContains(t, err, "up to 3")
}

// TestMigrationsSameInBothStores: a version names the same step in every
// store, so both ship the same numbers (a store with nothing to do for one
// ships a comment), and each set loads under the rule.
func TestMigrationsSameInBothStores(t *testing.T) {
	t.Parallel()
	pg, lite := postgres.LatestSchemaVersion(), sqlite.LatestSchemaVersion()
	require.NotZero(t, pg, "the PostgreSQL migrations load")
	require.NotZero(t, lite, "the SQLite migrations load")
	require.Equal(t, pg, lite, "both stores ship every version")
}

// fakeMigrator is a store.MigrateBackend over a list of applied versions,
// recording the calls it gets; a failed transaction leaves applied as it
// was.
type fakeMigrator struct {
	applied  []int
	calls    []string
	failExec int   // the version whose script fails
	checkErr error // what the guard's check returns
}

type fakeMigrateTx struct {
	f       *fakeMigrator
	applied []int
}

func (f *fakeMigrator) MigrateTx(ctx context.Context, fn func(tx store.MigrateTx) error) error {
	tx := &fakeMigrateTx{f: f, applied: append([]int(nil), f.applied...)}
	if err := fn(tx); err != nil {
		f.calls = append(f.calls, "rollback")
		return err
	}
	f.applied = tx.applied
	f.calls = append(f.calls, "commit")
	return nil
}

func (tx *fakeMigrateTx) MigrationTableEnsure(context.Context) error {
	tx.f.calls = append(tx.f.calls, "ensure")
	return nil
}

func (tx *fakeMigrateTx) MigrationVersionGet(context.Context) (int, error) {
	if len(tx.applied) == 0 {
		return 0, nil
	}
	return tx.applied[len(tx.applied)-1], nil
}

func (tx *fakeMigrateTx) MigrationExec(_ context.Context, m *store.Migration) error {
	tx.f.calls = append(tx.f.calls, fmt.Sprint("exec ", m.Version))
	if m.Version == tx.f.failExec {
		return errors.New("syntax error")
	}
	return nil
}

func (tx *fakeMigrateTx) MigrationRecord(_ context.Context, m *store.Migration) error {
	tx.applied = append(tx.applied, m.Version)
	return nil
}

func (tx *fakeMigrateTx) MigrationGuard(context.Context) (func(context.Context) error, error) {
	tx.f.calls = append(tx.f.calls, "guard")
	return func(context.Context) error {
		tx.f.calls = append(tx.f.calls, "check")
		return tx.f.checkErr
	}, nil
}

// TestMigrateApply: the pending migrations run and are recorded in order in
// one transaction, the guard around them only when some are pending; a
// failing script or check rolls them all back; UpTo stops early; a newer
// database is refused.
func TestMigrateApply(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	migs := []store.Migration{{Version: 1, Name: "001_a.sql"}, {Version: 2, Name: "002_b.sql"}, {Version: 3, Name: "003_c.sql"}}
	apply := func(f *fakeMigrator, upTo int) error {
		return store.MigrateApply(ctx, f, &store.MigrateApplyParams{Migrations: migs, UpTo: upTo})
	}

	f := &fakeMigrator{}
	require.NoError(t, apply(f, 2))
	require.Equal(t, []int{1, 2}, f.applied)
	require.Equal(t, []string{"ensure", "guard", "exec 1", "exec 2", "check", "commit"}, f.calls)

	f.calls = nil
	require.NoError(t, apply(f, 0))
	require.Equal(t, []int{1, 2, 3}, f.applied)
	require.Equal(t, []string{"ensure", "guard", "exec 3", "check", "commit"}, f.calls)

	f.calls = nil
	require.NoError(t, apply(f, 0))
	require.Equal(t, []string{"ensure", "commit"}, f.calls, "nothing pending: no guard")

	f = &fakeMigrator{failExec: 2}
	err := apply(f, 0)
	require.ErrorContains(t, err, "migration 002_b.sql: syntax error")
	require.Empty(t, f.applied)
	require.Equal(t, []string{"ensure", "guard", "exec 1", "exec 2", "rollback"}, f.calls)

	f = &fakeMigrator{checkErr: errors.New("orphans")}
	require.ErrorContains(t, apply(f, 0), "orphans")
	require.Empty(t, f.applied)

	f = &fakeMigrator{applied: []int{1, 2, 3, 4}}
	require.ErrorIs(t, apply(f, 0), store.ErrSchemaTooNew)
}
