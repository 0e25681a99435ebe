// Package sqlite is herald's embedded store (placeholder; being written).
package sqlite

import (
	"context"
	"errors"

	"github.com/heraldhq/herald/store"
)

// Config configures Open.
type Config struct {
	// Path is the database file. A lock file Path+".lock" keeps a second
	// process out.
	Path string
}

// Store is the SQLite implementation of store.Store.
type Store struct{ store.Store }

// Open opens (creating if needed) the database at cfg.Path.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return nil, errors.New("sqlite: not implemented")
}
