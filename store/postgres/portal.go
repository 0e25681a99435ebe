package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// PortalLinkCreate stores a portal link and deletes long-expired ones.
func (s *Store) PortalLinkCreate(ctx context.Context, params *store.PortalLinkCreateParams) error {
	const op = "error creating portal link"
	db, err := s.db(op)
	if err != nil {
		return err
	}
	var theme any
	if len(params.Theme) > 0 {
		theme = string(params.Theme)
	}
	// One statement, so one transaction: the cleanup and the insert commit
	// together.
	_, err = db.Exec(ctx, `WITH old AS (DELETE FROM portal_links WHERE expires_at < $7)
		INSERT INTO portal_links (hash, id, tenant, theme, created_at, expires_at)
		VALUES ($1, $2, $3, $4::jsonb, $5, $6)`,
		params.Hash, params.ID, params.Tenant, theme, ms(params.Now), ms(params.ExpiresAt),
		ms(params.Now.Add(-store.PortalLinkRetention)))
	return mapErr(op, err)
}

// PortalLinkConsume marks an unused, unexpired link used and returns it.
// The UPDATE locks the row: a concurrent call waits, re-checks used_at
// after the first commits, and matches nothing.
func (s *Store) PortalLinkConsume(ctx context.Context, params *store.PortalLinkConsumeParams) (*store.PortalLink, error) {
	const op = "error consuming portal link"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	var (
		l     store.PortalLink
		theme []byte
		used  time.Time
	)
	err = db.QueryRow(ctx, `UPDATE portal_links SET used_at = $1
		WHERE hash = $2 AND used_at IS NULL AND expires_at > $1
		RETURNING id, hash, tenant, theme, created_at, expires_at, used_at`,
		ms(params.Now), params.Hash).
		Scan(&l.ID, &l.Hash, &l.Tenant, &theme, &l.CreatedAt, &l.ExpiresAt, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("portal link not found, used or expired")
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	if theme != nil {
		l.Theme = json.RawMessage(theme)
	}
	l.CreatedAt, l.ExpiresAt = l.CreatedAt.UTC(), l.ExpiresAt.UTC()
	used = used.UTC()
	l.UsedAt = &used
	return &l, nil
}

// PortalLinkGet returns the link with this id.
func (s *Store) PortalLinkGet(ctx context.Context, id string) (*store.PortalLink, error) {
	const op = "error reading portal link"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	var (
		l     store.PortalLink
		theme []byte
		used  *time.Time
	)
	err = db.QueryRow(ctx, `SELECT id, hash, tenant, theme, created_at, expires_at, used_at
		FROM portal_links WHERE id = $1`, id).
		Scan(&l.ID, &l.Hash, &l.Tenant, &theme, &l.CreatedAt, &l.ExpiresAt, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("portal link %s not found", id)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	if theme != nil {
		l.Theme = json.RawMessage(theme)
	}
	l.CreatedAt, l.ExpiresAt = l.CreatedAt.UTC(), l.ExpiresAt.UTC()
	if used != nil {
		u := used.UTC()
		l.UsedAt = &u
	}
	return &l, nil
}
