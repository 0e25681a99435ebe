package testdb

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/heraldhq/herald/store/sqlite"
)

// sqliteTemplate is a database file migrated once per process, held in
// memory (a few hundred KiB) so nothing is left on disk to clean up.
var sqliteTemplate struct {
	once sync.Once
	data []byte
	err  error
}

// sqliteCopy writes the migrated file to path (mode 0600, as the store
// creates its files).
func sqliteCopy(t testing.TB, path string) {
	t.Helper()
	sqliteTemplate.once.Do(func() {
		sqliteTemplate.data, sqliteTemplate.err = sqliteBuild()
	})
	if sqliteTemplate.err != nil {
		t.Fatalf("sqlite template: %v", sqliteTemplate.err)
	}
	if err := os.WriteFile(path, sqliteTemplate.data, 0o600); err != nil {
		t.Fatalf("sqlite template: %v", err)
	}
}

// sqliteBuild migrates a file with the store's own Migrate and reads it
// back. Close checkpoints the write-ahead log into the file and removes
// it, so the file alone is the whole database; a log left behind is
// refused rather than copied without it.
func sqliteBuild() ([]byte, error) {
	dir, err := os.MkdirTemp("", "herald-testdb-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "herald.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		return nil, err
	}
	err = s.Migrate(ctx)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("%s-wal still holds %d bytes after close", path, fi.Size())
	}
	return os.ReadFile(path)
}
