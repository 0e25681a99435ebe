package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

var _ store.VAPIDStore = (*Store)(nil)

// VAPIDKeyEnsure stores the key unless one is stored, and returns the
// stored one (re-sealed under the ring's first key when needed). ON
// CONFLICT DO NOTHING makes nodes starting together agree on the first
// insert.
func (s *Store) VAPIDKeyEnsure(ctx context.Context, params *store.VAPIDKeyParams) (*store.VAPIDKey, error) {
	sealed, err := s.keys.Seal(params.PrivateKey, store.VAPIDKeyAAD)
	if err != nil {
		return nil, err
	}
	var out *store.VAPIDKey
	err = s.inTx(ctx, "error ensuring the VAPID key", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO webpush_vapid (id, private_key, public_key, created_at)
			VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING`, sealed, params.PublicKey, params.Now.UTC()); err != nil {
			return err
		}
		var stored string
		var err error
		out, stored, err = s.readVAPID(ctx, tx, true)
		if err != nil {
			return err
		}
		if s.keys != nil && !s.keys.Current(stored) {
			resealed, err := s.keys.Seal(out.PrivateKey, store.VAPIDKeyAAD)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE webpush_vapid SET private_key = $1 WHERE id = 1 AND private_key = $2`, resealed, stored)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// VAPIDKeyGet returns the stored key, or herald.ErrNotFound.
func (s *Store) VAPIDKeyGet(ctx context.Context) (*store.VAPIDKey, error) {
	var out *store.VAPIDKey
	err := s.inTx(ctx, "error reading the VAPID key", func(tx pgx.Tx) error {
		var err error
		out, _, err = s.readVAPID(ctx, tx, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// VAPIDKeyReplace stores the key in place of the stored one.
func (s *Store) VAPIDKeyReplace(ctx context.Context, params *store.VAPIDKeyParams) (*store.VAPIDKey, error) {
	sealed, err := s.keys.Seal(params.PrivateKey, store.VAPIDKeyAAD)
	if err != nil {
		return nil, err
	}
	now := params.Now.UTC().Truncate(time.Millisecond)
	err = s.inTx(ctx, "error replacing the VAPID key", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO webpush_vapid (id, private_key, public_key, created_at)
			VALUES (1, $1, $2, $3) ON CONFLICT (id) DO UPDATE SET private_key = excluded.private_key,
			public_key = excluded.public_key, created_at = excluded.created_at`, sealed, params.PublicKey, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &store.VAPIDKey{PrivateKey: params.PrivateKey, PublicKey: params.PublicKey, CreatedAt: now}, nil
}

// readVAPID reads the row, opened (locked FOR UPDATE when lock is set);
// stored is the private key as stored.
func (s *Store) readVAPID(ctx context.Context, tx pgx.Tx, lock bool) (*store.VAPIDKey, string, error) {
	q := `SELECT private_key, public_key, created_at FROM webpush_vapid WHERE id = 1`
	if lock {
		q += ` FOR UPDATE`
	}
	var k store.VAPIDKey
	var stored string
	err := tx.QueryRow(ctx, q).Scan(&stored, &k.PublicKey, &k.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", herald.NotFoundf("no VAPID key stored")
	}
	if err != nil {
		return nil, "", err
	}
	k.CreatedAt = k.CreatedAt.UTC()
	if k.PrivateKey, err = store.VAPIDOpen(s.keys, stored); err != nil {
		return nil, "", err
	}
	return &k, stored, nil
}
