package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// autoDisableColumn is sub.AutoDisable as stored: NULL for the defaults.
func autoDisableColumn(sub *herald.Subscription) *string {
	if sub.AutoDisable == nil {
		return nil
	}
	b, _ := json.Marshal(sub.AutoDisable) // two integers: cannot fail
	v := string(b)
	return &v
}

// healthResetSQL empties the failure streak of a subscription that is
// disabled now (it is being re-enabled).
const healthResetSQL = `UPDATE subscription_health SET consecutive_failures = 0, failing_since = NULL
	WHERE subscription_id = $1 AND EXISTS (SELECT 1 FROM subscriptions WHERE id = $1 AND state = 'disabled')`

// healthUpsertSQL applies a batch's health updates (store/health.go) in
// one statement: a batch with a success replaces the streak, one without
// extends it (relative, so racing completions both count: the row lock
// orders them); the day counts roll over when the day moves on, and a batch
// stamped with an earlier day than the row's (another node's clock) counts
// in the row's day. queueHealth sorts the rows by id, so two batches lock
// them in the same order.
const healthUpsertSQL = `
INSERT INTO subscription_health AS h (subscription_id, consecutive_failures, failing_since, day, attempts, successes)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::bigint[], $5::bigint[], $6::bigint[])
ON CONFLICT (subscription_id) DO UPDATE SET
	consecutive_failures = CASE WHEN excluded.successes > 0 THEN excluded.consecutive_failures
		ELSE h.consecutive_failures + excluded.consecutive_failures END,
	failing_since = CASE WHEN excluded.successes > 0 THEN excluded.failing_since
		ELSE COALESCE(h.failing_since, excluded.failing_since) END,
	prev_attempts = CASE WHEN excluded.day <= h.day THEN h.prev_attempts
		WHEN excluded.day = h.day + 1 THEN h.attempts ELSE 0 END,
	prev_successes = CASE WHEN excluded.day <= h.day THEN h.prev_successes
		WHEN excluded.day = h.day + 1 THEN h.successes ELSE 0 END,
	attempts = CASE WHEN excluded.day <= h.day THEN h.attempts + excluded.attempts ELSE excluded.attempts END,
	successes = CASE WHEN excluded.day <= h.day THEN h.successes + excluded.successes ELSE excluded.successes END,
	day = GREATEST(h.day, excluded.day)
RETURNING subscription_id, consecutive_failures, failing_since`

// queueHealth queues the health upsert when there is anything to apply
// and reports whether it did.
func queueHealth(batch *pgx.Batch, updates []store.HealthUpdate, now time.Time) bool {
	if len(updates) == 0 {
		return false
	}
	// Rows are locked in id order whatever the caller's order, so two
	// batches never deadlock on them.
	updates = slices.SortedFunc(slices.Values(updates), func(a, b store.HealthUpdate) int {
		return strings.Compare(a.SubscriptionID, b.SubscriptionID)
	})
	n := len(updates)
	ids := make([]string, n)
	failures, days, attempts, successes := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	since := make([]*time.Time, n)
	day := store.HealthDay(now)
	for i, u := range updates {
		ids[i], failures[i], days[i] = u.SubscriptionID, int64(u.Failures), day
		attempts[i], successes[i] = int64(u.Attempts), int64(u.Successes)
		if u.Failures > 0 {
			t := ms(u.FailingSince)
			since[i] = &t
		}
	}
	batch.Queue(healthUpsertSQL, ids, failures, since, days, attempts, successes)
	return true
}

// healthRead reads the upsert's streaks into res.
func healthRead(br pgx.BatchResults, res *store.DeliveryCompleteManyResult) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var st store.HealthStreak
		var since *time.Time
		var n int64
		if err := rows.Scan(&st.SubscriptionID, &n, &since); err != nil {
			return err
		}
		st.ConsecutiveFailures = int(n)
		if since != nil {
			st.FailingSince = since.UTC()
		}
		res.Health = append(res.Health, st)
	}
	return rows.Err()
}

// SubscriptionHealthGet returns a subscription's health at params.Now.
func (s *Store) SubscriptionHealthGet(ctx context.Context, params *store.SubscriptionHealthGetParams) (*herald.SubscriptionHealth, error) {
	const op = "error reading subscription health"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	var (
		failures, day, att, ok, prevAtt, prevOK *int64
		since                                   *time.Time
	)
	err = db.QueryRow(ctx, `SELECT h.consecutive_failures, h.failing_since, h.day, h.attempts,
		h.successes, h.prev_attempts, h.prev_successes
		FROM subscriptions s LEFT JOIN subscription_health h ON h.subscription_id = s.id
		WHERE s.id = $1 AND s.deleted_at IS NULL`, params.ID).Scan(&failures, &since, &day, &att, &ok, &prevAtt, &prevOK)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("subscription %s not found", params.ID)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	h := &herald.SubscriptionHealth{}
	if day == nil {
		return h, nil // never attempted
	}
	h.ConsecutiveFailures = int(*failures)
	if since != nil {
		t := since.UTC()
		h.FailingSince = &t
	}
	store.HealthEstimate(h, store.HealthCounts{Day: *day, Attempts: *att, Successes: *ok,
		PrevAttempts: *prevAtt, PrevOK: *prevOK}, params.Now)
	return h, nil
}
