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

// PortalLinkCreate stores a portal link and deletes long-expired ones.
func (s *Store) PortalLinkCreate(ctx context.Context, params *store.PortalLinkCreateParams) error {
	var theme any
	if len(params.Theme) > 0 {
		theme = string(params.Theme)
	}
	return s.writeTx(ctx, "portal link create", func(tx queryer) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM portal_links WHERE expires_at < ?`,
			ms(params.Now.Add(-store.PortalLinkRetention))); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO portal_links (hash, id, tenant, theme, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`,
			params.Hash, params.ID, params.Tenant, theme, ms(params.Now), ms(params.ExpiresAt))
		return err
	})
}

// PortalLinkConsume marks an unused, unexpired link used and returns it.
// The single writer connection serializes concurrent calls; the UPDATE's
// WHERE clause makes the second one match nothing.
func (s *Store) PortalLinkConsume(ctx context.Context, params *store.PortalLinkConsumeParams) (*store.PortalLink, error) {
	var (
		l                            store.PortalLink
		theme                        sql.NullString
		createdAt, expiresAt, usedAt int64
	)
	err := s.writeTx(ctx, "portal link consume", func(tx queryer) error {
		return tx.QueryRowContext(ctx, `UPDATE portal_links SET used_at = ?
			WHERE hash = ? AND used_at IS NULL AND expires_at > ?
			RETURNING id, hash, tenant, theme, created_at, expires_at, used_at`,
			ms(params.Now), params.Hash, ms(params.Now)).
			Scan(&l.ID, &l.Hash, &l.Tenant, &theme, &createdAt, &expiresAt, &usedAt)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.NotFoundf("portal link not found, used or expired")
	}
	if err != nil {
		return nil, err
	}
	if theme.Valid {
		l.Theme = json.RawMessage(theme.String)
	}
	l.CreatedAt, l.ExpiresAt = fromMS(createdAt), fromMS(expiresAt)
	used := fromMS(usedAt)
	l.UsedAt = &used
	return &l, nil
}

// PortalLinkGet returns the link with this id.
func (s *Store) PortalLinkGet(ctx context.Context, id string) (*store.PortalLink, error) {
	var (
		l                    store.PortalLink
		theme                sql.NullString
		createdAt, expiresAt int64
		usedAt               sql.NullInt64
	)
	err := s.rdb.QueryRowContext(ctx, `SELECT id, hash, tenant, theme, created_at, expires_at, used_at
		FROM portal_links WHERE id = ?`, id).
		Scan(&l.ID, &l.Hash, &l.Tenant, &theme, &createdAt, &expiresAt, &usedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.NotFoundf("portal link %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: portal link get: %w", unavailable(err))
	}
	if theme.Valid {
		l.Theme = json.RawMessage(theme.String)
	}
	l.CreatedAt, l.ExpiresAt = fromMS(createdAt), fromMS(expiresAt)
	if usedAt.Valid {
		used := fromMS(usedAt.Int64)
		l.UsedAt = &used
	}
	return &l, nil
}
