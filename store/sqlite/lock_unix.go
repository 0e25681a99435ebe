//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// lockFile holds an exclusive flock on path until release. flock locks
// belong to the open file description, so a second Open in the same process
// is refused just like one from another process; the kernel drops the lock
// when the process dies, so a crash never leaves a stale lock behind.
func lockFile(path string) (release func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := string(bytes.TrimSpace(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("%w (pid %s): %s", ErrLocked, pid, path)
		}
		return nil, fmt.Errorf("sqlite: lock %s: %w", path, err)
	}
	// The pid is informational (for the error above); the lock is the flock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() error {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return f.Close()
	}, nil
}
