//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package sqlite

import (
	"fmt"
	"runtime"
)

// lockFile is not implemented here: refusing to start is better than
// running two processes on one database unnoticed.
func lockFile(path string) (release func() error, err error) {
	return nil, fmt.Errorf("sqlite: data directory locking is not supported on %s: %s", runtime.GOOS, path)
}
