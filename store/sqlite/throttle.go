package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Throttling (rate_limit, max_in_flight, Retry-After pauses). The rule is
// store/throttle.go's; throttleBudget counts what it needs and
// store.ThrottleState.Budget decides.
//
// Only subscriptions matching throttledPredicate pay for any of it: they are
// found through the partial index subscriptions_throttled (empty when no
// subscription is throttled), every other one is claimed as before. SQLite
// has one writer, so the claim transaction is already serialized: no lock
// beyond it is needed.
//
// Request starts are rows of throttle_starts, recorded in the claim
// transaction (the claim is the start). The in-flight count is the number
// of distinct deliveries named by those rows that are still in_flight, so
// it needs no index on deliveries.

const throttledPredicate = `(s.rate_max IS NOT NULL OR s.max_in_flight > 0 OR s.paused_until IS NOT NULL)`

// throttleSub is one throttled subscription's settings.
type throttleSub struct {
	id          string
	rateMax     sql.NullInt64
	ratePer     sql.NullInt64
	maxInFlight int64
	pausedUntil sql.NullInt64
	ordering    string
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// window is the rate window (store.RateWindow) in milliseconds: the margin
// alone without a rate limit, how long start rows are kept for the
// in-flight count.
func (t *throttleSub) window() int64 {
	per := 0
	if t.rateMax.Valid {
		per = int(t.ratePer.Int64)
	}
	return store.RateWindow(per).Milliseconds()
}

// throttledSubs returns the enabled throttled subscriptions, by id.
func throttledSubs(ctx context.Context, q querier) (map[string]*throttleSub, error) {
	rows, err := q.QueryContext(ctx, `SELECT s.id, s.rate_max, s.rate_per_seconds, s.max_in_flight, s.paused_until, s.ordering
		FROM subscriptions s INDEXED BY subscriptions_throttled
		WHERE `+throttledPredicate+` AND s.state = 'enabled' AND s.deleted_at IS NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]*throttleSub{}
	for rows.Next() {
		var t throttleSub
		if err := rows.Scan(&t.id, &t.rateMax, &t.ratePer, &t.maxInFlight, &t.pausedUntil, &t.ordering); err != nil {
			return nil, err
		}
		out[t.id] = &t
	}
	return out, rows.Err()
}

// throttleBudget is store.ThrottleState.Budget for the subscription at now,
// with returns in milliseconds (0 when only a completion frees budget).
func throttleBudget(ctx context.Context, q querier, t *throttleSub, now int64) (budget int, why store.WaitingFor, returns int64, err error) {
	st := store.ThrottleState{MaxInFlight: int(t.maxInFlight)}
	if t.pausedUntil.Valid {
		st.PausedUntil = fromMS(t.pausedUntil.Int64)
	}
	// Counted only when the rule reads them (store.ThrottleState).
	if !st.PausedUntil.After(fromMS(now)) {
		if t.rateMax.Valid {
			st.RateLimit = &herald.RateLimit{Max: int(t.rateMax.Int64), PerSeconds: int(t.ratePer.Int64)}
			from := now - t.window()
			if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM throttle_starts
				WHERE subscription_id = ? AND at > ?`, t.id, from).Scan(&st.Started); err != nil {
				return 0, "", 0, err
			}
			if st.Started >= st.RateLimit.Max {
				var at int64
				if err := q.QueryRowContext(ctx, `SELECT at FROM throttle_starts
					WHERE subscription_id = ? AND at > ? ORDER BY at DESC LIMIT 1 OFFSET ?`,
					t.id, from, max(st.RateLimit.Max-1, 0)).Scan(&at); err != nil {
					return 0, "", 0, err
				}
				st.MaxthStart = fromMS(at)
			}
		}
		if t.maxInFlight > 0 {
			if err := q.QueryRowContext(ctx, `SELECT COUNT(DISTINCT t.delivery_id) FROM throttle_starts t
				JOIN deliveries d ON d.id = t.delivery_id
				WHERE t.subscription_id = ? AND d.state = 'in_flight'`, t.id).Scan(&st.InFlight); err != nil {
				return 0, "", 0, err
			}
		}
	}
	budget, why, at := st.Budget(fromMS(now))
	if !at.IsZero() {
		returns = ms(at)
	}
	return budget, why, returns, nil
}

// throttleClaimCaps sets cap on each throttled candidate of a claim and
// drops those without budget. It prunes the start rows nobody needs any
// more on the way (outside every window, delivery no longer in flight).
func throttleClaimCaps(ctx context.Context, tx queryer, cands []*claimCandidate, now int64) ([]*claimCandidate, error) {
	subs, err := throttledSubs(ctx, tx)
	if err != nil || len(subs) == 0 {
		return cands, err
	}
	kept := cands[:0]
	for _, c := range cands {
		t := subs[c.id]
		if t == nil {
			kept = append(kept, c)
			continue
		}
		if !t.pausedUntil.Valid || t.pausedUntil.Int64 <= now {
			if _, err := tx.ExecContext(ctx, `DELETE FROM throttle_starts
				WHERE subscription_id = ? AND at <= ? AND NOT EXISTS (SELECT 1 FROM deliveries d
					WHERE d.id = throttle_starts.delivery_id AND d.state = 'in_flight')`, t.id, now-t.window()); err != nil {
				return nil, err
			}
		}
		if !t.rateMax.Valid && t.maxInFlight <= 0 && (!t.pausedUntil.Valid || t.pausedUntil.Int64 <= now) {
			kept = append(kept, c) // a pause that has ended: nothing to count
			continue
		}
		budget, _, _, err := throttleBudget(ctx, tx, t, now)
		if err != nil {
			return nil, err
		}
		if budget > 0 {
			c.throttled, c.cap = true, budget
			kept = append(kept, c)
		}
	}
	return kept, nil
}

// throttleRecord records the request starts of ids, claimed for subID at
// now. Starts are kept in non-decreasing order per subscription.
func throttleRecord(ctx context.Context, tx queryer, subID string, ids []string, now int64) error {
	if len(ids) == 0 {
		return nil
	}
	var last sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(at) FROM throttle_starts WHERE subscription_id = ?`, subID).Scan(&last); err != nil {
		return err
	}
	at := now
	if last.Valid && last.Int64 > at {
		at = last.Int64
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `INSERT INTO throttle_starts (subscription_id, at, delivery_id) VALUES (?, ?, ?)`,
			subID, at, id); err != nil {
			return err
		}
	}
	return nil
}

// throttleNextDue returns the earliest time a throttled subscription's
// pending delivery of the tier can be claimed (nil when none can before a
// completion frees budget).
func throttleNextDue(ctx context.Context, q querier, tier int, now int64) (*int64, error) {
	subs, err := throttledSubs(ctx, q)
	if err != nil || len(subs) == 0 {
		return nil, err
	}
	var best *int64
	for _, t := range subs {
		var earliest sql.NullInt64
		if err := q.QueryRowContext(ctx, `SELECT MIN(next_attempt_at) FROM deliveries
			WHERE state = 'pending' AND tier = ? AND subscription_id = ?`, tier, t.id).Scan(&earliest); err != nil {
			return nil, err
		}
		if !earliest.Valid {
			continue
		}
		budget, _, returns, err := throttleBudget(ctx, q, t, now)
		if err != nil {
			return nil, err
		}
		at := earliest.Int64
		if budget > 0 && at <= now && (t.ordering == "fifo" || t.ordering == "latest") {
			// A due delivery the claim left behind waits for its key; the
			// completion that frees it wakes the engine (as in
			// orderedNextDue). Only its next maturity counts, or the tier
			// loop would spin.
			var future sql.NullInt64
			if err := q.QueryRowContext(ctx, `SELECT MIN(next_attempt_at) FROM deliveries
				WHERE state = 'pending' AND tier = ? AND subscription_id = ? AND next_attempt_at > ?`,
				tier, t.id, now).Scan(&future); err != nil {
				return nil, err
			}
			if !future.Valid {
				continue
			}
			at = future.Int64
		}
		if budget == 0 {
			if returns == 0 {
				continue // at max_in_flight: a completion wakes the engine
			}
			at = max(at, returns)
		}
		if best == nil || at < *best {
			best = &at
		}
	}
	return best, nil
}

// throttledCount counts due pending deliveries (tiers 0..tiers-1) of
// subscriptions without budget at now.
func throttledCount(ctx context.Context, q querier, tiers int, now int64) (int64, error) {
	subs, err := throttledSubs(ctx, q)
	if err != nil || len(subs) == 0 {
		return 0, err
	}
	var total int64
	for _, t := range subs {
		budget, _, _, err := throttleBudget(ctx, q, t, now)
		if err != nil {
			return 0, err
		}
		if budget > 0 {
			continue
		}
		for tier := 0; tier < tiers; tier++ {
			var n int64
			if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM deliveries
				WHERE state = 'pending' AND tier = ? AND subscription_id = ? AND next_attempt_at <= ?`,
				tier, t.id, now).Scan(&n); err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total, nil
}

// throttleWaitingFor says whether a due pending delivery of subID waits for
// its subscription's throttle at now ("" when not).
func throttleWaitingFor(ctx context.Context, q querier, subID string, now int64) (store.WaitingFor, error) {
	var t throttleSub
	err := q.QueryRowContext(ctx, `SELECT s.id, s.rate_max, s.rate_per_seconds, s.max_in_flight, s.paused_until
		FROM subscriptions s WHERE s.id = ? AND `+throttledPredicate, subID).
		Scan(&t.id, &t.rateMax, &t.ratePer, &t.maxInFlight, &t.pausedUntil)
	if errors.Is(err, sql.ErrNoRows) {
		return store.WaitingForNothing, nil
	} else if err != nil {
		return "", err
	}
	_, why, _, err := throttleBudget(ctx, q, &t, now)
	return why, err
}
