//go:build !linux

package proctune

// KeepSysmonAwake does nothing outside Linux: it re-executes through
// /proc/self/exe, and the costs it removes were measured on Linux only.
func KeepSysmonAwake() error { return nil }
