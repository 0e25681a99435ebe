package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/heraldhq/herald/store"
)

// APITokenCreate stores the hash of an API token. Storing a hash that is
// already there is a no-op, so a configured admin token can be stored on
// every start.
func (s *Store) APITokenCreate(ctx context.Context, params *store.APITokenCreateParams) error {
	return s.writeTx(ctx, "api token create", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_tokens (hash, created_at) VALUES (?, ?)
			ON CONFLICT (hash) DO NOTHING`, params.Hash, ms(params.Now))
		return err
	})
}

// APITokenExists reports whether a token with this hash is stored.
func (s *Store) APITokenExists(ctx context.Context, hash string) (bool, error) {
	var n int
	if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_tokens WHERE hash = ?`, hash).Scan(&n); err != nil {
		return false, fmt.Errorf("sqlite: api token exists: %w", unavailable(err))
	}
	return n > 0, nil
}

// APITokenCount counts stored tokens.
func (s *Store) APITokenCount(ctx context.Context) (int, error) {
	var n int
	if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_tokens`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: api token count: %w", unavailable(err))
	}
	return n, nil
}
