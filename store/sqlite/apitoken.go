package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// APITokenCreate stores the hash of an API token. Storing a hash that is
// already there is a no-op, so a configured admin token can be stored on
// every start.
func (s *Store) APITokenCreate(ctx context.Context, params *store.APITokenCreateParams) error {
	p := *params
	p.Defaults()
	scopes, err := json.Marshal(p.Scopes)
	if err != nil {
		return fmt.Errorf("sqlite: api token create: %w", err)
	}
	var expires any
	if p.ExpiresAt != nil {
		expires = ms(*p.ExpiresAt)
	}
	return s.writeTx(ctx, "api token create", func(tx queryer) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_tokens (hash, id, name, scopes, tenant, expires_at, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING`,
			p.Hash, p.ID, p.Name, string(scopes), p.Tenant, expires, ms(p.Now))
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

const apiTokenColumns = `id, hash, name, scopes, tenant, expires_at, created_at`

func scanAPIToken(row scanner) (*store.APIToken, error) {
	var (
		t         store.APIToken
		scopes    string
		expires   sql.NullInt64
		createdAt int64
	)
	if err := row.Scan(&t.ID, &t.Hash, &t.Name, &scopes, &t.Tenant, &expires, &createdAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(scopes), &t.Scopes); err != nil {
		return nil, fmt.Errorf("api token %s scopes: %w", t.ID, err)
	}
	if expires.Valid {
		at := fromMS(expires.Int64)
		t.ExpiresAt = &at
	}
	t.CreatedAt = fromMS(createdAt)
	return &t, nil
}

// APITokenGet returns the token stored with this hash.
func (s *Store) APITokenGet(ctx context.Context, hash string) (*store.APIToken, error) {
	t, err := scanAPIToken(s.rdb.QueryRowContext(ctx, `SELECT `+apiTokenColumns+` FROM api_tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.NotFoundf("api token not found")
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: api token get: %w", unavailable(err))
	}
	return t, nil
}

// APITokenList returns every token, oldest first.
func (s *Store) APITokenList(ctx context.Context) ([]*store.APIToken, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+apiTokenColumns+` FROM api_tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: api token list: %w", unavailable(err))
	}
	defer rows.Close()
	var out []*store.APIToken
	for rows.Next() {
		t, err := scanAPIToken(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: api token list: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// APITokenDelete removes a token.
func (s *Store) APITokenDelete(ctx context.Context, id string) error {
	return s.writeTx(ctx, "api token delete", func(tx queryer) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM api_tokens WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return herald.NotFoundf("api token %s not found", id)
		}
		return nil
	})
}

// APITokenCount counts stored tokens.
func (s *Store) APITokenCount(ctx context.Context) (int, error) {
	var n int
	if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_tokens`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: api token count: %w", unavailable(err))
	}
	return n, nil
}
