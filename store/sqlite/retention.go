package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/heraldhq/herald/store"
)

// finishedPredicate must appear verbatim in a query for SQLite to use the
// partial index deliveries_finished (migration 004).
const finishedPredicate = "state NOT IN ('pending', 'in_flight')"

// RetentionSweep deletes what retention no longer keeps (store.RetentionRun
// runs the steps below), in write transactions of at most BatchSize rows
// each, so the single writer is never held long.
func (s *Store) RetentionSweep(ctx context.Context, params *store.RetentionSweepParams) (*store.RetentionSweepResult, error) {
	return store.RetentionRun(ctx, sweeper{s}, params)
}

// sweeper is the store as a store.RetentionBackend: one write transaction
// per step (the rules: store/retention.go).
type sweeper struct{ s *Store }

func (w sweeper) RetentionCursors() *store.RetentionCursors { return &w.s.swept }

// RetentionDeliveryDelete deletes deliveries with their attempts.
func (w sweeper) RetentionDeliveryDelete(ctx context.Context, p *store.RetentionDeliveryDeleteParams) (int, error) {
	states := make([]any, len(p.States))
	for i, st := range p.States {
		states[i] = string(st)
	}
	var n int64
	err := w.s.queueTx(ctx, "retention: deliveries", func(tx queryer) error {
		ids, err := queryStrings(ctx, tx, `SELECT id FROM deliveries
			WHERE `+finishedPredicate+` AND state IN (`+placeholders(len(states))+`) AND updated_at < ?
			ORDER BY state, updated_at LIMIT ?`, append(states, ms(p.Before), p.Limit)...)
		if err != nil || len(ids) == 0 {
			return err
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM attempts
			WHERE delivery_id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
			return err
		}
		// The state is checked again: nothing else writes inside this
		// transaction, but the guard keeps the rule local.
		n, err = affected(tx.ExecContext(ctx, `DELETE FROM deliveries
			WHERE id IN (SELECT value FROM json_each(?)) AND state IN (`+placeholders(len(states))+`)`,
			append([]any{string(list)}, states...)...))
		return err
	})
	return int(n), err
}

// RetentionEventDelete deletes old events no delivery names.
func (w sweeper) RetentionEventDelete(ctx context.Context, p *store.RetentionEventDeleteParams) (int, error) {
	return w.delete(ctx, "retention: events", `DELETE FROM events WHERE rowid IN (
		SELECT e.rowid FROM events e
		WHERE e.created_at < ?
		  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.event_tenant = e.tenant)
		ORDER BY e.created_at LIMIT ?)`, ms(p.Before), p.Limit)
}

// RetentionSecretDelete deletes rotated-out secrets, never a
// subscription's last.
func (w sweeper) RetentionSecretDelete(ctx context.Context, p *store.RetentionSecretDeleteParams) (int, error) {
	return w.delete(ctx, "retention: secrets", `DELETE FROM subscription_secrets WHERE id IN (
		SELECT x.id FROM subscription_secrets x
		WHERE x.expires_at < ?1
		  AND EXISTS (SELECT 1 FROM subscription_secrets n WHERE n.subscription_id = x.subscription_id
			AND (n.expires_at IS NULL OR n.expires_at >= ?1))
		LIMIT ?2)`, ms(p.Before), p.Limit)
}

// delete runs one DELETE statement in a write transaction and returns the
// rows it deleted.
func (w sweeper) delete(ctx context.Context, op, query string, args ...any) (int, error) {
	var n int64
	err := w.s.queueTx(ctx, op, func(tx queryer) (err error) {
		n, err = affected(tx.ExecContext(ctx, query, args...))
		return err
	})
	return int(n), err
}

// RetentionKeyScan reads the primary keys of up to Limit delivery_keys
// rows after After, then deletes the victims in that range, in one write
// transaction (nothing else writes meanwhile, so the range holds exactly the
// rows read).
func (w sweeper) RetentionKeyScan(ctx context.Context, p *store.RetentionKeyScanParams) (*store.RetentionScanResult, error) {
	after := p.After
	if after == nil {
		after = []string{"", ""}
	}
	// Idle keys go only under Events retention (the flag is off when it
	// keeps them); a deleted subscription's rows go whatever it is.
	idle, cutoff := !p.IdleBefore.IsZero(), int64(0)
	if idle {
		cutoff = ms(p.IdleBefore)
	}
	res := &store.RetentionScanResult{}
	err := w.s.queueTx(ctx, "retention: keys", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, `SELECT subscription_id, event_key FROM delivery_keys
			WHERE (subscription_id, event_key) > (?, ?) ORDER BY subscription_id, event_key LIMIT ?`,
			after[0], after[1], p.Limit)
		if err != nil {
			return err
		}
		var sub, key string
		for rows.Next() {
			if err := rows.Scan(&sub, &key); err != nil {
				rows.Close()
				return err
			}
			res.Examined++
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if res.Examined == 0 {
			return nil
		}
		res.Last = []string{sub, key}
		// The NOT EXISTS repeats deliveries_key_order's predicate so
		// SQLite probes that partial index.
		r, err := tx.ExecContext(ctx, `DELETE FROM delivery_keys WHERE (subscription_id, event_key) IN (
			SELECT k.subscription_id, k.event_key FROM delivery_keys k
			LEFT JOIN subscriptions s ON s.id = k.subscription_id
			WHERE (k.subscription_id, k.event_key) > (?1, ?2) AND (k.subscription_id, k.event_key) <= (?3, ?4)
			  AND (s.id IS NULL OR s.deleted_at IS NOT NULL
			   OR (?5 AND k.holder IS NULL
				AND (k.last_sent_at IS NULL OR (k.last_sent_at < ?6 AND k.last_sent_at + s.key_interval_ms <= ?7))
				AND NOT EXISTS (SELECT 1 FROM deliveries d
					WHERE d.subscription_id = k.subscription_id AND d.event_key = k.event_key
					  AND d.event_key <> '' AND d.state IN ('pending', 'in_flight')))))`,
			after[0], after[1], sub, key, idle, cutoff, ms(p.Now))
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		res.Deleted = int(n)
		return err
	})
	return res, err
}

// affected is the number of rows a statement changed.
func affected(r sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// RetentionSubscriptionDelete removes deleted subscriptions with
// everything else that names them.
func (w sweeper) RetentionSubscriptionDelete(ctx context.Context, p *store.RetentionSubscriptionDeleteParams) (int, error) {
	var n int64
	err := w.s.queueTx(ctx, "retention: subscriptions", func(tx queryer) error {
		ids, err := queryStrings(ctx, tx, `SELECT s.id FROM subscriptions s
			WHERE s.deleted_at IS NOT NULL AND s.deleted_at < ?
			  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.subscription_id = s.id)
			ORDER BY s.deleted_at LIMIT ?`, ms(p.Before), p.Limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		// Rows that name the subscription first (secrets have a foreign
		// key to it).
		for _, table := range []string{"subscription_secrets", "delivery_keys", "throttle_starts"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+`
				WHERE subscription_id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
				return err
			}
		}
		n, err = affected(tx.ExecContext(ctx, `DELETE FROM subscriptions
			WHERE id IN (SELECT value FROM json_each(?)) AND deleted_at IS NOT NULL`, string(list)))
		return err
	})
	return int(n), err
}

// RetentionAttemptScan reads attempts in delivery-id order (the
// attempts_delivery index) and deletes the attempts of the delivery ids it
// read that have no delivery. The foreign key keeps herald from writing
// such rows; a database edited with foreign keys off (the sqlite3 shell's
// default) may still hold some.
func (w sweeper) RetentionAttemptScan(ctx context.Context, p *store.RetentionAttemptScanParams) (*store.RetentionScanResult, error) {
	from := ""
	if p.After != nil {
		from = p.After[0]
	}
	res := &store.RetentionScanResult{}
	err := w.s.queueTx(ctx, "retention: orphan attempts", func(tx queryer) error {
		scanned, err := queryStrings(ctx, tx, `SELECT delivery_id FROM attempts
			WHERE delivery_id > ? ORDER BY delivery_id LIMIT ?`, from, p.Limit)
		if err != nil || len(scanned) == 0 {
			return err
		}
		res.Examined, res.Last = len(scanned), scanned[len(scanned)-1:]
		list, err := json.Marshal(scanned)
		if err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, `DELETE FROM attempts WHERE delivery_id IN (
			SELECT DISTINCT j.value FROM json_each(?) j
			WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = j.value))`, string(list))
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		res.Deleted = int(n)
		return err
	})
	return res, err
}

// queryStrings runs a query returning one text column.
func queryStrings(ctx context.Context, q queryer, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// LeaderAttempt always succeeds: a SQLite data directory has one node.
func (s *Store) LeaderAttempt(ctx context.Context) (bool, error) { return true, nil }

// LeaderRelease has nothing to give up.
func (s *Store) LeaderRelease(ctx context.Context) error { return nil }
