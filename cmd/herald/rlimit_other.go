//go:build !unix

package main

// fileLimit is 0 (unknown) where there is no RLIMIT_NOFILE.
func fileLimit() int { return 0 }
