package testdb

import (
	"os"
	"testing"
)

// TestMain drops the schemas the tests pooled.
func TestMain(m *testing.M) {
	code := m.Run()
	PoolDrop()
	os.Exit(code)
}
