package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

var _ store.SecretKeeper = (*Store)(nil)

// secretKeySQL groups secret rows by the "enc:v1:<key id>:" header
// (seal.HeaderLen characters); plain-text rows group under ”.
var secretKeySQL = fmt.Sprintf(`SELECT CASE WHEN value LIKE 'enc:%%' THEN substr(value, 1, %[1]d) ELSE '' END AS k,
	count(*) FROM subscription_secrets GROUP BY k
	UNION ALL
	SELECT CASE WHEN url LIKE 'enc:%%' THEN substr(url, 1, %[1]d) ELSE '' END AS k,
	count(*) FROM connections GROUP BY k`, seal.HeaderLen)

// SecretKeyCounts counts secret rows by the key that sealed them.
func (s *Store) SecretKeyCounts(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.inTx(ctx, "error counting secrets by key", func(tx pgx.Tx) error {
		clear(out)
		rows, err := tx.Query(ctx, secretKeySQL)
		if err != nil {
			return err
		}
		var (
			header string
			n      int64
		)
		_, err = pgx.ForEachRow(rows, []any{&header, &n}, func() error {
			out[store.SecretKeyIDOf(header)] += n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SecretReseal re-seals one batch of secret rows under the first key. The
// UPDATE's WHERE value = old is the compare-and-set: under READ COMMITTED a
// row changed by a concurrent transaction is re-checked after it commits
// and then no longer matches.
func (s *Store) SecretReseal(ctx context.Context, params *store.SecretResealParams) (*store.SecretResealResult, error) {
	if s.keys == nil {
		return nil, errors.New("postgres: secret reseal: no encryption key configured")
	}
	limit := params.Limit
	if limit <= 0 {
		limit = store.DefaultResealBatch
	}
	res := &store.SecretResealResult{}
	err := s.inTx(ctx, "error re-encrypting secrets", func(tx pgx.Tx) error {
		*res = store.SecretResealResult{Next: params.After}
		rows, err := tx.Query(ctx, `SELECT id, subscription_id, value FROM subscription_secrets
			WHERE id > $1 ORDER BY id LIMIT $2`, params.After, limit)
		if err != nil {
			return err
		}
		type row struct {
			id         int64
			subID, old string
		}
		var (
			batch []row
			r     row
		)
		if _, err := pgx.ForEachRow(rows, []any{&r.id, &r.subID, &r.old}, func() error {
			batch = append(batch, r)
			return nil
		}); err != nil {
			return err
		}
		res.Scanned, res.Done = len(batch), len(batch) < limit
		if len(batch) > 0 {
			res.Next = batch[len(batch)-1].id
		}
		if s.resealHook != nil {
			s.resealHook(ctx)
		}
		// The rewrites go in one round trip.
		updates := &pgx.Batch{}
		for _, r := range batch {
			sealed, changed, err := store.SecretResealValue(s.keys, r.old, r.subID)
			if err != nil {
				res.Unreadable = append(res.Unreadable, store.SecretRow{ID: r.id, SubscriptionID: r.subID})
				continue
			}
			if !changed {
				continue
			}
			updates.Queue(`UPDATE subscription_secrets SET value = $1 WHERE id = $2 AND value = $3`, sealed, r.id, r.old)
		}
		if updates.Len() == 0 {
			return nil
		}
		br := tx.SendBatch(ctx, updates)
		for range updates.Len() {
			tag, err := br.Exec()
			if err != nil {
				_ = br.Close()
				return err
			}
			if tag.RowsAffected() == 1 {
				res.Resealed++
			} else {
				res.Raced++
			}
		}
		return br.Close()
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ConnectionReseal re-seals every connection URL under the first key,
// each with a compare-and-set on its old value.
func (s *Store) ConnectionReseal(ctx context.Context) (*store.ConnectionResealResult, error) {
	if s.keys == nil {
		return nil, errors.New("error re-encrypting connections: no encryption key configured")
	}
	res := &store.ConnectionResealResult{}
	err := s.inTx(ctx, "error re-encrypting connections", func(tx pgx.Tx) error {
		*res = store.ConnectionResealResult{}
		rows, err := tx.Query(ctx, `SELECT name, url FROM connections ORDER BY name`)
		if err != nil {
			return err
		}
		var batch [][2]string
		var name, url string
		if _, err := pgx.ForEachRow(rows, []any{&name, &url}, func() error {
			batch = append(batch, [2]string{name, url})
			return nil
		}); err != nil {
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
			tag, err := tx.Exec(ctx, `UPDATE connections SET url = $3 WHERE name = $1 AND url = $2`, r[0], r[1], sealed)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				res.Raced++
			} else {
				res.Resealed++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
