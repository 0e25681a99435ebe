package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// DeliveryCompleteMany applies attempt outcomes, subscription disables and
// system events in one transaction.
//
// An outcome whose delivery no longer exists (removed by retention) is
// reported in Stale and its attempt is not recorded: there is no row to
// attach it to, and failing the whole batch for it would lose the others.
func (s *Store) DeliveryCompleteMany(ctx context.Context, params *store.DeliveryCompleteManyParams) (*store.DeliveryCompleteManyResult, error) {
	for _, o := range params.Outcomes {
		if !o.State.Valid() || o.State == herald.DeliveryInFlight {
			return nil, fmt.Errorf("sqlite: delivery complete many: delivery %s: invalid new state %q", o.DeliveryID, o.State)
		}
	}
	res := &store.DeliveryCompleteManyResult{Stale: []string{}}
	now := ms(params.Now)
	err := s.queueTx(ctx, "delivery complete many", func(tx *sql.Tx) error {
		insAttempt, err := tx.PrepareContext(ctx, `INSERT INTO attempts (delivery_id, n, at, duration_ms, status,
			error, error_message, response_excerpt, tier) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer insAttempt.Close()
		apply, err := tx.PrepareContext(ctx, `UPDATE deliveries SET state = ?, tier = ?,
			attempt_count = attempt_count + 1, next_attempt_at = ?, lease_owner = NULL, lease_until = NULL,
			last_status = ?, last_error = ?, last_message = ?, updated_at = ?
			WHERE id = ? AND state = 'in_flight' AND lease_owner = ?`)
		if err != nil {
			return err
		}
		defer apply.Close()
		// keyed is 1 for a delivery with an event key: its key may be held
		// (ordering.go) and is freed with the outcome.
		exists, err := tx.PrepareContext(ctx, `SELECT event_key <> '' FROM deliveries WHERE id = ?`)
		if err != nil {
			return err
		}
		defer exists.Close()

		delivered := 0
		for _, o := range params.Outcomes {
			var keyed int
			if err := exists.QueryRowContext(ctx, o.DeliveryID).Scan(&keyed); errors.Is(err, sql.ErrNoRows) {
				res.Stale = append(res.Stale, o.DeliveryID)
				continue
			} else if err != nil {
				return err
			}
			a := o.Attempt
			if _, err := insAttempt.ExecContext(ctx, o.DeliveryID, a.N, ms(a.At), a.DurationMS, a.Status,
				string(a.Error), a.ErrorMessage, a.ResponseExcerpt, a.Tier); err != nil {
				return fmt.Errorf("delivery %s attempt: %w", o.DeliveryID, err)
			}
			var next any
			if o.State == herald.DeliveryPending {
				next = now
				if o.NextAttemptAt != nil {
					next = ms(*o.NextAttemptAt)
				}
			}
			r, err := apply.ExecContext(ctx, string(o.State), o.Tier, next, a.Status, string(a.Error),
				a.ErrorMessage, now, o.DeliveryID, o.LeaseOwner)
			if err != nil {
				return fmt.Errorf("delivery %s: %w", o.DeliveryID, err)
			}
			if n, _ := r.RowsAffected(); n == 0 {
				res.Stale = append(res.Stale, o.DeliveryID)
				continue
			}
			res.Applied++
			if keyed == 1 {
				if err := keyComplete(ctx, tx, o.DeliveryID, o.LeaseOwner, o.State == herald.DeliveryDelivered); err != nil {
					return fmt.Errorf("delivery %s key: %w", o.DeliveryID, err)
				}
			}
			if o.State == herald.DeliveryDelivered {
				delivered++
			}
		}
		if delivered > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = value + ? WHERE key = 'delivered_total'`, delivered); err != nil {
				return err
			}
		}

		disabled := false
		for _, d := range params.DisableSubscriptions {
			r, err := tx.ExecContext(ctx, `UPDATE subscriptions SET state = 'disabled', disabled_reason = ?, updated_at = ?
				WHERE id = ? AND deleted_at IS NULL`, d.Reason, now, d.ID)
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n > 0 {
				disabled = true
			}
		}
		if disabled {
			if err := bumpSubscriptionsVersion(ctx, tx); err != nil {
				return err
			}
		}

		for _, p := range params.PauseSubscriptions {
			if _, err := tx.ExecContext(ctx, `UPDATE subscriptions SET paused_until = MAX(COALESCE(paused_until, 0), ?)
				WHERE id = ? AND deleted_at IS NULL`, ms(p.Until), p.ID); err != nil {
				return err
			}
		}
		// Fan-out caches drive direct dispatch; the bump makes them
		// reload and see the pause.
		if len(params.PauseSubscriptions) > 0 && !disabled {
			if err := bumpSubscriptionsVersion(ctx, tx); err != nil {
				return err
			}
		}

		_, err = insertEvents(ctx, tx, params.Events, params.Now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
