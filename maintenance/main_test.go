package maintenance_test

import (
	"os"
	"testing"

	"github.com/heraldhq/herald/internal/testdb"
)

// TestMain drops the schemas testdb pooled for this package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	testdb.PoolDrop()
	os.Exit(code)
}
