package httpapi

import (
	"testing"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// BenchmarkAuthenticateStored measures the per-request cost of a stored
// token: one primary-key read, no cache (ADR 0013). Measured on the CI
// box: about 8 µs on SQLite and 67 µs (one round trip) on a local
// PostgreSQL, against a map lookup for the one-minute cache it replaced.
func BenchmarkAuthenticateStored(b *testing.B) {
	for _, be := range testdb.Backends() {
		b.Run(be.Name, func(b *testing.B) { benchAuth(b, be.New(b)) })
	}
}

func benchAuth(b *testing.B, s store.Store) {
	if err := s.APITokenCreate(b.Context(), &store.APITokenCreateParams{Hash: HashToken("bench-token"), Scopes: []string{"events:read"}}); err != nil {
		b.Fatal(err)
	}
	a := NewTokenAuth(s, "static")
	for b.Loop() {
		p, err := a.Authenticate(b.Context(), "bench-token")
		if err != nil || p == nil {
			b.Fatal(p, err)
		}
	}
}
