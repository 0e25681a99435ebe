package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

var _ store.VAPIDStore = (*Store)(nil)

// VAPIDKeyEnsure stores the key unless one is stored, and returns the
// stored one (re-sealed under the ring's first key when needed).
func (s *Store) VAPIDKeyEnsure(ctx context.Context, params *store.VAPIDKeyParams) (*store.VAPIDKey, error) {
	sealed, err := s.keys.Seal(params.PrivateKey, store.VAPIDKeyAAD)
	if err != nil {
		return nil, err
	}
	var out *store.VAPIDKey
	err = s.writeTx(ctx, "vapid key ensure", func(tx queryer) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webpush_vapid (id, private_key, public_key, created_at)
			VALUES (1, ?, ?, ?) ON CONFLICT (id) DO NOTHING`, sealed, params.PublicKey, ms(params.Now)); err != nil {
			return err
		}
		var stored string
		var err error
		out, stored, err = s.readVAPID(ctx, tx)
		if err != nil {
			return err
		}
		if s.keys != nil && !s.keys.Current(stored) {
			resealed, err := s.keys.Seal(out.PrivateKey, store.VAPIDKeyAAD)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE webpush_vapid SET private_key = ? WHERE id = 1`, resealed)
			return err
		}
		return nil
	})
	return out, err
}

// VAPIDKeyGet returns the stored key, or herald.ErrNotFound.
func (s *Store) VAPIDKeyGet(ctx context.Context) (*store.VAPIDKey, error) {
	var out *store.VAPIDKey
	err := s.readTx(ctx, "vapid key get", func(tx queryer) error {
		var err error
		out, _, err = s.readVAPID(ctx, tx)
		return err
	})
	return out, err
}

// VAPIDKeyReplace stores the key in place of the stored one.
func (s *Store) VAPIDKeyReplace(ctx context.Context, params *store.VAPIDKeyParams) (*store.VAPIDKey, error) {
	sealed, err := s.keys.Seal(params.PrivateKey, store.VAPIDKeyAAD)
	if err != nil {
		return nil, err
	}
	err = s.writeTx(ctx, "vapid key replace", func(tx queryer) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO webpush_vapid (id, private_key, public_key, created_at)
			VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET private_key = excluded.private_key,
			public_key = excluded.public_key, created_at = excluded.created_at`, sealed, params.PublicKey, ms(params.Now))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &store.VAPIDKey{PrivateKey: params.PrivateKey, PublicKey: params.PublicKey, CreatedAt: fromMS(ms(params.Now))}, nil
}

// readVAPID reads the row, opened; stored is the private key as stored.
func (s *Store) readVAPID(ctx context.Context, tx queryer) (*store.VAPIDKey, string, error) {
	var stored, public string
	var created int64
	err := tx.QueryRowContext(ctx, `SELECT private_key, public_key, created_at FROM webpush_vapid WHERE id = 1`).
		Scan(&stored, &public, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", herald.NotFoundf("no VAPID key stored")
	}
	if err != nil {
		return nil, "", err
	}
	plain, err := store.VAPIDOpen(s.keys, stored)
	if err != nil {
		return nil, "", err
	}
	return &store.VAPIDKey{PrivateKey: plain, PublicKey: public, CreatedAt: fromMS(created)}, stored, nil
}
