//go:build unix

package main

import "syscall"

// fileLimit raises the soft RLIMIT_NOFILE to the hard limit (Go's runtime
// does so at start on Linux since Go 1.19; this makes it explicit and
// covers the rest) and returns the soft limit, 0 when unknown.
func fileLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if l.Cur < l.Max {
		raised := syscall.Rlimit{Cur: l.Max, Max: l.Max}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			l = raised
		}
	}
	if l.Cur > 1<<30 {
		return 1 << 30 // RLIM_INFINITY and the like
	}
	return int(l.Cur)
}
