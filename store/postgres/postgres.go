// Package postgres is herald's PostgreSQL store (placeholder; being written).
package postgres

import (
	"context"
	"errors"

	"github.com/heraldhq/herald/store"
)

// Config configures Open.
type Config struct {
	// URL is a postgres:// connection string.
	URL string
	// Schema, when set, is created if missing and used as the search_path
	// of every connection (tests give each test its own schema).
	Schema string
	// MaxConns caps the pool; 0 means the pgx default.
	MaxConns int32
}

// Store is the PostgreSQL implementation of store.Store.
type Store struct{ store.Store }

// Open connects to PostgreSQL. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return nil, errors.New("postgres: not implemented")
}
