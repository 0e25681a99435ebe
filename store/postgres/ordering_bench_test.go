package postgres_test

import (
	"testing"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/storetest"
)

// BenchmarkOrderingClaim: latest over 1,000 hot keys against ordering none
// (storetest.BenchmarkOrderingClaim).
//
//	go test -run '^$' -bench OrderingClaim ./store/postgres/
func BenchmarkOrderingClaim(b *testing.B) {
	storetest.BenchmarkOrderingClaim(b, func(b *testing.B) store.Store { return testdb.Postgres(b) })
}

// BenchmarkOrderedNextDue: DeliveryNextDue with every key of a fifo
// backlog taken (storetest.BenchmarkOrderedNextDue).
//
//	go test -run '^$' -bench OrderedNextDue ./store/postgres/
func BenchmarkOrderedNextDue(b *testing.B) {
	storetest.BenchmarkOrderedNextDue(b, func(b *testing.B) store.Store { return testdb.Postgres(b) })
}
