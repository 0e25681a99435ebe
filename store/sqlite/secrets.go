package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

var _ store.SecretKeeper = (*Store)(nil)

// secretKeySQL groups secret rows by the "enc:v1:<key id>:" header
// (seal.HeaderLen characters); plain-text rows group under ”.
var secretKeySQL = fmt.Sprintf(`SELECT CASE WHEN secret LIKE 'enc:%%' THEN substr(secret, 1, %[1]d) ELSE '' END AS k,
	count(*) FROM subscription_secrets GROUP BY k
	UNION ALL
	SELECT CASE WHEN url LIKE 'enc:%%' THEN substr(url, 1, %[1]d) ELSE '' END AS k,
	count(*) FROM connections GROUP BY k`, seal.HeaderLen)

// SecretKeyCounts counts secret rows by the key that sealed them.
func (s *Store) SecretKeyCounts(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.readTx(ctx, "secret key counts", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, secretKeySQL)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var header string
			var n int64
			if err := rows.Scan(&header, &n); err != nil {
				return err
			}
			out[store.SecretKeyIDOf(header)] += n
		}
		return rows.Err()
	})
	return out, err
}

// SecretReseal re-seals one batch of secret rows under the first key.
func (s *Store) SecretReseal(ctx context.Context, params *store.SecretResealParams) (*store.SecretResealResult, error) {
	if s.keys == nil {
		return nil, errors.New("sqlite: secret reseal: no encryption key configured")
	}
	limit := params.Limit
	if limit <= 0 {
		limit = store.DefaultResealBatch
	}
	res := &store.SecretResealResult{Next: params.After}
	err := s.writeTx(ctx, "secret reseal", func(tx queryer) error {
		*res = store.SecretResealResult{Next: params.After}
		rows, err := tx.QueryContext(ctx, `SELECT id, subscription_id, secret FROM subscription_secrets
			WHERE id > ? ORDER BY id LIMIT ?`, params.After, limit)
		if err != nil {
			return err
		}
		type row struct {
			id         int64
			subID, old string
		}
		var batch []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.subID, &r.old); err != nil {
				rows.Close()
				return err
			}
			batch = append(batch, r)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		res.Scanned, res.Done = len(batch), len(batch) < limit
		for _, r := range batch {
			res.Next = r.id
			sealed, changed, err := store.SecretResealValue(s.keys, r.old, r.subID)
			if err != nil {
				res.Unreadable = append(res.Unreadable, store.SecretRow{ID: r.id, SubscriptionID: r.subID})
				continue
			}
			if !changed {
				continue
			}
			n, err := affected(tx.ExecContext(ctx, `UPDATE subscription_secrets SET secret = ?
				WHERE id = ? AND secret = ?`, sealed, r.id, r.old))
			if err != nil {
				return err
			}
			if n == 1 {
				res.Resealed++
			} else {
				res.Raced++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ConnectionReseal re-seals every connection URL under the first key.
func (s *Store) ConnectionReseal(ctx context.Context) (*store.ConnectionResealResult, error) {
	if s.keys == nil {
		return nil, errors.New("sqlite: connection reseal: no encryption key configured")
	}
	res := &store.ConnectionResealResult{}
	err := s.writeTx(ctx, "connection reseal", func(tx queryer) error {
		*res = store.ConnectionResealResult{}
		rows, err := tx.QueryContext(ctx, `SELECT name, url FROM connections ORDER BY name`)
		if err != nil {
			return err
		}
		var batch [][2]string
		for rows.Next() {
			var r [2]string
			if err := rows.Scan(&r[0], &r[1]); err != nil {
				rows.Close()
				return err
			}
			batch = append(batch, r)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		res.Scanned = len(batch)
		for _, r := range batch {
			sealed, changed, err := store.ConnectionResealValue(s.keys, r[1], r[0])
			if err != nil {
				res.Unreadable = append(res.Unreadable, r[0])
				continue
			}
			if !changed {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE connections SET url = ? WHERE name = ? AND url = ?`, sealed, r[0], r[1]); err != nil {
				return err
			}
			res.Resealed++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
