package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// DeliveryCompleteMany applies attempt outcomes, subscription disables and
// system events in one transaction.
//
// The outcome rules (validation, missing deliveries, stale leases) are
// store/complete.go's.
//
// completeChunkRows caps the outcomes of one statement: the attempt insert
// binds 11 parameters per row and SQLite allows 32,766.
const completeChunkRows = 250

// completeChunk applies outcomes for distinct deliveries with three
// statements whatever their number — read which exist (and have a key),
// insert their attempts, update the states whose lease is still held —
// instead of three per outcome: per-statement driver overhead (a cgo call
// and a context watcher each) dominated completion transactions. It returns
// how many became delivered.
func completeChunk(ctx context.Context, tx queryer, outcomes []store.DeliveryOutcome, now int64, res *store.DeliveryCompleteManyResult) (int, error) {
	ids := make([]any, len(outcomes))
	for i, o := range outcomes {
		ids[i] = o.DeliveryID
	}
	in, inArgs := inList(ids)
	rows, err := tx.QueryContext(ctx, `SELECT id, event_key <> '' FROM deliveries WHERE id IN (`+in+`)`, inArgs...)
	if err != nil {
		return 0, err
	}
	keyed := make(map[string]bool, len(outcomes))
	for rows.Next() {
		var id string
		var k bool
		if err := rows.Scan(&id, &k); err != nil {
			rows.Close()
			return 0, err
		}
		keyed[id] = k
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}

	var (
		aArgs   = make([]any, 0, 9*len(outcomes))
		uArgs   = make([]any, 0, 8*len(outcomes)+1)
		present = 0
	)
	uArgs = append(uArgs, now)
	for _, o := range outcomes {
		if _, ok := keyed[o.DeliveryID]; !ok {
			// No such delivery: no attempt (store/complete.go); Record
			// reports it stale.
			continue
		}
		present++
		a := o.Attempt
		aArgs = append(aArgs, o.DeliveryID, a.N, ms(a.At), a.DurationMS, a.Status,
			string(a.Error), a.ErrorMessage, a.ResponseExcerpt, a.Tier,
			store.EncodeAttemptHeaders(a.RequestHeaders), store.EncodeAttemptHeaders(a.ResponseHeaders))
		var next any
		if o.State == herald.DeliveryPending {
			next = now
			if o.NextAttemptAt != nil {
				next = ms(*o.NextAttemptAt)
			}
		}
		uArgs = append(uArgs, o.DeliveryID, o.LeaseOwner, string(o.State), o.Tier, next, a.Status,
			string(a.Error), a.ErrorMessage)
	}
	if present == 0 {
		res.Record(outcomes, nil)
		return 0, nil
	}
	// Both statements are padded to a power of two of rows (padded), with
	// all-NULL rows that insert and match nothing.
	var attempts, updates strings.Builder
	attempts.WriteString(`INSERT INTO attempts (delivery_id, n, at, duration_ms, status, error, error_message,
		response_excerpt, tier, request_headers, response_headers) SELECT * FROM (VALUES `)
	pad := valuesRows(&attempts, `(?,?,?,?,?,?,?,?,?,?,?)`, present)
	attempts.WriteString(`) WHERE column1 IS NOT NULL`)
	aArgs = padArgs(aArgs, pad, 11)
	if _, err := tx.ExecContext(ctx, attempts.String(), aArgs...); err != nil {
		return 0, fmt.Errorf("recording attempts: %w", err)
	}
	// VALUES columns: column1 id, column2 owner, column3 state, column4 tier,
	// column5 next_attempt_at, column6 status, column7 error, column8 message.
	updates.WriteString(`UPDATE deliveries SET state = v.column3, tier = v.column4,
		attempt_count = attempt_count + 1, next_attempt_at = v.column5, lease_owner = NULL, lease_until = NULL,
		last_status = v.column6, last_error = v.column7, last_message = v.column8, updated_at = ?
		FROM (VALUES `)
	valuesRows(&updates, `(?,?,?,?,?,?,?,?)`, present)
	uArgs = padArgs(uArgs, pad, 8)
	updates.WriteString(`) AS v
		WHERE deliveries.id = v.column1 AND deliveries.state = 'in_flight' AND deliveries.lease_owner = v.column2
		RETURNING deliveries.id`)
	rows, err = tx.QueryContext(ctx, updates.String(), uArgs...)
	if err != nil {
		return 0, fmt.Errorf("applying outcomes: %w", err)
	}
	applied := make(map[string]bool, present)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		applied[id] = true
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}

	res.Record(outcomes, applied)
	delivered := 0
	for _, o := range outcomes {
		if !applied[o.DeliveryID] {
			continue
		}
		if keyed[o.DeliveryID] {
			if err := keyComplete(ctx, tx, o.DeliveryID, o.LeaseOwner, o.State == herald.DeliveryDelivered); err != nil {
				return 0, fmt.Errorf("delivery %s key: %w", o.DeliveryID, err)
			}
		}
		if o.State == herald.DeliveryDelivered {
			delivered++
		}
	}
	return delivered, nil
}

func (s *Store) DeliveryCompleteMany(ctx context.Context, params *store.DeliveryCompleteManyParams) (*store.DeliveryCompleteManyResult, error) {
	if err := store.OutcomesValidate(params.Outcomes); err != nil {
		return nil, err
	}
	res := &store.DeliveryCompleteManyResult{Stale: []string{}}
	now := ms(params.Now)
	err := s.queueTx(ctx, "delivery complete many", func(tx queryer) error {
		delivered := 0
		// Chunks never repeat a delivery id, so an outcome sees the state
		// left by an earlier outcome for the same delivery (which makes it
		// stale), as if applied one by one.
		for _, chunk := range store.OutcomeChunks(params.Outcomes, completeChunkRows) {
			n, err := completeChunk(ctx, tx, chunk, now, res)
			if err != nil {
				return err
			}
			delivered += n
		}
		if delivered > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = value + ? WHERE key = 'delivered_total'`, delivered); err != nil {
				return err
			}
		}

		if err := healthApply(ctx, tx, params.Health, store.HealthDay(params.Now), res); err != nil {
			return fmt.Errorf("recording subscription health: %w", err)
		}

		disabled := false
		for _, d := range params.DisableSubscriptions {
			// An already disabled subscription is left alone, so repeated
			// 410s do not make every fan-out cache reload. A conditional
			// (auto-)disable needs the streak still there.
			r, err := tx.ExecContext(ctx, `UPDATE subscriptions SET state = 'disabled', disabled_reason = ?, updated_at = ?
				WHERE id = ? AND deleted_at IS NULL AND state <> 'disabled'
				AND (? <= 0 OR EXISTS (SELECT 1 FROM subscription_health h
					WHERE h.subscription_id = subscriptions.id AND h.consecutive_failures >= ?))`,
				d.Reason, now, d.ID, d.MinFailures, d.MinFailures)
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n > 0 {
				disabled = true
				res.Disabled = append(res.Disabled, d.ID)
			}
		}
		if disabled {
			if err := bumpSubscriptionsVersion(ctx, tx); err != nil {
				return err
			}
		}

		paused := false
		for _, p := range params.PauseSubscriptions {
			until := ms(p.Until)
			r, err := tx.ExecContext(ctx, `UPDATE subscriptions SET paused_until = ?
				WHERE id = ? AND deleted_at IS NULL AND (paused_until IS NULL OR paused_until < ?)`, until, p.ID, until)
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n > 0 {
				paused = true
			}
		}
		// Fan-out caches drive direct dispatch; the bump makes them
		// reload the pauses (only those) and see it.
		if paused {
			if err := bumpPausesVersion(ctx, tx); err != nil {
				return err
			}
		}

		_, err := insertEvents(ctx, tx, params.Events, params.Now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
