package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// defaultRetentionBatch is the rows deleted per transaction when the params
// leave BatchSize at 0.
const defaultRetentionBatch = 1000

// finishedPredicate must appear verbatim in a query for SQLite to use the
// partial index deliveries_finished (migration 004).
const finishedPredicate = "state NOT IN ('pending', 'in_flight')"

// RetentionSweep deletes finished deliveries, dead letters, events, idle
// key state, deleted subscriptions, rotated-out secrets and orphan
// attempts past their retention (store/retention.go), in write
// transactions of at most BatchSize rows each, so the single writer is
// never held long.
func (s *Store) RetentionSweep(ctx context.Context, params *store.RetentionSweepParams) (*store.RetentionSweepResult, error) {
	batch := params.BatchSize
	if batch <= 0 {
		batch = defaultRetentionBatch
	}
	res := &store.RetentionSweepResult{}
	cut := params.Cutoffs()
	finished := make([]string, len(store.RetentionStates))
	for i, st := range store.RetentionStates {
		finished[i] = string(st)
	}
	if !cut.Delivered.IsZero() {
		n, err := s.sweepDeliveries(ctx, finished, ms(cut.Delivered), batch)
		res.Deliveries = n
		if err != nil {
			return res, err
		}
	}
	if !cut.Dead.IsZero() {
		n, err := s.sweepDeliveries(ctx, []string{string(herald.DeliveryDead)}, ms(cut.Dead), batch)
		res.Dead = n
		if err != nil {
			return res, err
		}
	}
	if !cut.Events.IsZero() {
		cutoff := ms(cut.Events)
		err := s.sweepLoop(ctx, "retention: events", batch, &res.Events, func(tx *sql.Tx) (int64, error) {
			return affected(tx.ExecContext(ctx, `DELETE FROM events WHERE rowid IN (
				SELECT e.rowid FROM events e
				WHERE e.created_at < ?
				  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.event_tenant = e.tenant)
				ORDER BY e.created_at LIMIT ?)`, cutoff, batch))
		})
		if err != nil {
			return res, err
		}
	}
	// Key state: a deleted subscription's always; an idle key's under
	// Events retention (the flag is off when it keeps them).
	keys := keySweep{idle: !cut.Keys.IsZero(), now: ms(params.Now)}
	if keys.idle {
		keys.cutoff = ms(cut.Keys)
	}
	n, err := s.keysSwept.Scan(ctx, batch, func(ctx context.Context, after []string, limit int) ([]string, int, int, error) {
		return s.sweepKeys(ctx, &keys, after, limit)
	})
	res.Keys = n
	if err != nil {
		return res, err
	}
	if !cut.Secrets.IsZero() {
		cutoff := ms(cut.Secrets)
		err := s.sweepLoop(ctx, "retention: secrets", batch, &res.Secrets, func(tx *sql.Tx) (int64, error) {
			return affected(tx.ExecContext(ctx, `DELETE FROM subscription_secrets WHERE id IN (
				SELECT x.id FROM subscription_secrets x
				WHERE x.expires_at < ?1
				  AND EXISTS (SELECT 1 FROM subscription_secrets n WHERE n.subscription_id = x.subscription_id
					AND (n.expires_at IS NULL OR n.expires_at >= ?1))
				LIMIT ?2)`, cutoff, batch))
		})
		if err != nil {
			return res, err
		}
	}
	if !cut.Subscriptions.IsZero() {
		n, err := s.sweepSubscriptions(ctx, ms(cut.Subscriptions), batch)
		res.Subscriptions = n
		if err != nil {
			return res, err
		}
	}
	n, err = s.attemptsSwept.Scan(ctx, batch, s.sweepOrphanAttempts)
	res.Attempts = n
	return res, err
}

// keySweep is the rule of one sweep for key rows (store/retention.go).
type keySweep struct {
	idle        bool  // idle keys go (Events retention is set)
	cutoff, now int64 // last send before cutoff, interval run out at now
}

// sweepKeys is a store.SweepScanStep over delivery_keys: it reads the
// primary keys of up to batch rows after after, then deletes the victims in
// that range, in one write transaction (nothing else writes meanwhile, so
// the range holds exactly the rows read).
func (s *Store) sweepKeys(ctx context.Context, k *keySweep, after []string, batch int) (last []string, examined, deleted int, err error) {
	if after == nil {
		after = []string{"", ""}
	}
	err = s.queueTx(ctx, "retention: keys", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT subscription_id, event_key FROM delivery_keys
			WHERE (subscription_id, event_key) > (?, ?) ORDER BY subscription_id, event_key LIMIT ?`,
			after[0], after[1], batch)
		if err != nil {
			return err
		}
		var sub, key string
		for rows.Next() {
			if err := rows.Scan(&sub, &key); err != nil {
				rows.Close()
				return err
			}
			examined++
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if examined == 0 {
			return nil
		}
		last = []string{sub, key}
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
			after[0], after[1], sub, key, k.idle, k.cutoff, k.now)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		deleted = int(n)
		return err
	})
	return last, examined, deleted, err
}

// sweepLoop runs del, one write transaction per batch, until a batch
// deletes fewer than batch rows, adding what it deleted to count.
func (s *Store) sweepLoop(ctx context.Context, op string, batch int, count *int, del func(tx *sql.Tx) (int64, error)) error {
	for {
		var n int64
		err := s.queueTx(ctx, op, func(tx *sql.Tx) (err error) {
			n, err = del(tx)
			return err
		})
		if err != nil {
			return err
		}
		*count += int(n)
		if int(n) < batch {
			return nil
		}
	}
}

// affected is the number of rows a statement changed.
func affected(r sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// sweepSubscriptions removes deleted subscriptions deleted before cutoff
// that have no delivery left, with everything else that names them.
func (s *Store) sweepSubscriptions(ctx context.Context, cutoff int64, batch int) (int, error) {
	total := 0
	err := s.sweepLoop(ctx, "retention: subscriptions", batch, &total, func(tx *sql.Tx) (int64, error) {
		ids, err := queryStrings(ctx, tx, `SELECT s.id FROM subscriptions s
			WHERE s.deleted_at IS NOT NULL AND s.deleted_at < ?
			  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.subscription_id = s.id)
			ORDER BY s.deleted_at LIMIT ?`, cutoff, batch)
		if err != nil || len(ids) == 0 {
			return 0, err
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return 0, err
		}
		// Rows that name the subscription first (secrets have a foreign
		// key to it).
		for _, table := range []string{"subscription_secrets", "delivery_keys", "throttle_starts"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+`
				WHERE subscription_id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
				return 0, err
			}
		}
		return affected(tx.ExecContext(ctx, `DELETE FROM subscriptions
			WHERE id IN (SELECT value FROM json_each(?)) AND deleted_at IS NOT NULL`, string(list)))
	})
	return total, err
}

// sweepOrphanAttempts is a store.SweepScanStep over attempts, in
// delivery-id order (the attempts_delivery index): it deletes the attempts
// of the delivery ids it reads that have no delivery. The foreign key keeps
// herald from writing such rows; a database edited with foreign keys off
// (the sqlite3 shell's default) may still hold some.
func (s *Store) sweepOrphanAttempts(ctx context.Context, after []string, batch int) (last []string, examined, deleted int, err error) {
	from := ""
	if after != nil {
		from = after[0]
	}
	err = s.queueTx(ctx, "retention: orphan attempts", func(tx *sql.Tx) error {
		scanned, err := queryStrings(ctx, tx, `SELECT delivery_id FROM attempts
			WHERE delivery_id > ? ORDER BY delivery_id LIMIT ?`, from, batch)
		if err != nil || len(scanned) == 0 {
			return err
		}
		examined, last = len(scanned), scanned[len(scanned)-1:]
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
		deleted = int(n)
		return err
	})
	return last, examined, deleted, err
}

// queryStrings runs a query returning one text column.
func queryStrings(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
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

// sweepDeliveries deletes deliveries in states last updated before cutoff,
// with their attempts, batch by batch, and returns how many.
func (s *Store) sweepDeliveries(ctx context.Context, states []string, cutoff int64, batch int) (int, error) {
	total := 0
	err := s.sweepLoop(ctx, "retention: deliveries", batch, &total, func(tx *sql.Tx) (int64, error) {
		ids, err := queryStrings(ctx, tx, `SELECT id FROM deliveries
			WHERE `+finishedPredicate+` AND state IN (`+placeholders(len(states))+`) AND updated_at < ?
			ORDER BY state, updated_at LIMIT ?`, append(anySlice(states), cutoff, batch)...)
		if err != nil || len(ids) == 0 {
			return 0, err
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM attempts
			WHERE delivery_id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
			return 0, err
		}
		// The state is checked again: nothing else writes inside this
		// transaction, but the guard keeps the rule local.
		return affected(tx.ExecContext(ctx, `DELETE FROM deliveries
			WHERE id IN (SELECT value FROM json_each(?)) AND state IN (`+placeholders(len(states))+`)`,
			append([]any{string(list)}, anySlice(states)...)...))
	})
	return total, err
}

// LeaderAttempt always succeeds: a SQLite data directory has one node.
func (s *Store) LeaderAttempt(ctx context.Context) (bool, error) { return true, nil }

// LeaderRelease has nothing to give up.
func (s *Store) LeaderRelease(ctx context.Context) error { return nil }
