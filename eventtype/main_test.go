package eventtype

import (
	"testing"

	"github.com/heraldhq/herald/internal/testdb"
)

// TestMain drops the PostgreSQL schemas testdb pooled for these tests.
func TestMain(m *testing.M) { testdb.Main(m) }
