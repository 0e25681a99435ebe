package postgres_test

import (
	"testing"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/storetest"
)

// BenchmarkClaimWhilePublishing: claims on a fresh schema that grows while
// it is claimed, as under `herald bench` (storetest.BenchmarkClaimWhilePublishing).
//
//	go test -run '^$' -bench ClaimWhilePublishing ./store/postgres/
func BenchmarkClaimWhilePublishing(b *testing.B) {
	storetest.BenchmarkClaimWhilePublishing(b, func(b *testing.B) store.Store { return testdb.Postgres(b) })
}
