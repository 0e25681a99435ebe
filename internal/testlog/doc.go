// Package testlog holds a log sink for tests: a buffer a logger on other
// goroutines may write to while the test reads it.
package testlog
