package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// fileMode is the mode of the database and its -wal and -shm files: they
// hold events, receiver URLs and (without --encryption-key) signing
// secrets in plain text, so only herald's user may read them.
const fileMode = 0o600

// privateFiles creates the database file with fileMode if it does not
// exist and sets fileMode on the database, -wal and -shm files that do
// (existing installations were created 0644). SQLite itself creates a
// database 0644 less the umask; the -wal and -shm it creates later take
// the database file's mode, so creating the database first is what keeps
// them private too. A file herald may not chmod (another owner) is left as
// it is: refusing to open over it would be worse than its mode.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		// The new file too: O_CREATE's mode is reduced by the umask.
		err := os.Chmod(p, fileMode)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("sqlite: chmod %s: %w", p, err)
		}
	}
	return nil
}
