package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// autoDisableColumn is sub.AutoDisable as stored: NULL for the defaults.
func autoDisableColumn(sub *herald.Subscription) any {
	if sub.AutoDisable == nil {
		return nil
	}
	b, _ := json.Marshal(sub.AutoDisable) // two integers: cannot fail
	return string(b)
}

// healthResetSQL empties the failure streak of a subscription that is
// disabled now (it is being re-enabled).
const healthResetSQL = `UPDATE subscription_health SET consecutive_failures = 0, failing_since = NULL
	WHERE subscription_id = ?1 AND EXISTS (SELECT 1 FROM subscriptions WHERE id = ?1 AND state = 'disabled')`

// healthUpsertSet is the conflict branch of the health upsert
// (store/health.go): a batch with a success replaces the streak, one
// without extends it; the day counts roll over when the day moves on. A
// batch stamped with an earlier day than the row's (another node's clock)
// counts in the row's day.
const healthUpsertSet = ` ON CONFLICT (subscription_id) DO UPDATE SET
	consecutive_failures = CASE WHEN excluded.successes > 0 THEN excluded.consecutive_failures
		ELSE subscription_health.consecutive_failures + excluded.consecutive_failures END,
	failing_since = CASE WHEN excluded.successes > 0 THEN excluded.failing_since
		ELSE COALESCE(subscription_health.failing_since, excluded.failing_since) END,
	prev_attempts = CASE WHEN excluded.day <= subscription_health.day THEN subscription_health.prev_attempts
		WHEN excluded.day = subscription_health.day + 1 THEN subscription_health.attempts ELSE 0 END,
	prev_successes = CASE WHEN excluded.day <= subscription_health.day THEN subscription_health.prev_successes
		WHEN excluded.day = subscription_health.day + 1 THEN subscription_health.successes ELSE 0 END,
	attempts = CASE WHEN excluded.day <= subscription_health.day THEN subscription_health.attempts + excluded.attempts
		ELSE excluded.attempts END,
	successes = CASE WHEN excluded.day <= subscription_health.day THEN subscription_health.successes + excluded.successes
		ELSE excluded.successes END,
	day = MAX(subscription_health.day, excluded.day)
	RETURNING subscription_id, consecutive_failures, failing_since`

// healthApply upserts updates in one statement and records the streaks
// they leave in res.
func healthApply(ctx context.Context, tx queryer, updates []store.HealthUpdate, day int64, res *store.DeliveryCompleteManyResult) error {
	if len(updates) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO subscription_health (subscription_id, consecutive_failures, failing_since, day,
		attempts, successes) VALUES `)
	args := make([]any, 0, 6*len(updates))
	for i, u := range updates {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("(?,?,?,?,?,?)")
		var since any
		if u.Failures > 0 {
			since = ms(u.FailingSince)
		}
		args = append(args, u.SubscriptionID, u.Failures, since, day, u.Attempts, u.Successes)
	}
	b.WriteString(healthUpsertSet)
	rows, err := tx.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var st store.HealthStreak
		var since sql.NullInt64
		if err := rows.Scan(&st.SubscriptionID, &st.ConsecutiveFailures, &since); err != nil {
			return err
		}
		if since.Valid {
			st.FailingSince = fromMS(since.Int64)
		}
		res.Health = append(res.Health, st)
	}
	return rows.Err()
}

// SubscriptionHealthGet returns a subscription's health at params.Now.
func (s *Store) SubscriptionHealthGet(ctx context.Context, params *store.SubscriptionHealthGetParams) (*herald.SubscriptionHealth, error) {
	h := &herald.SubscriptionHealth{}
	err := s.readTx(ctx, "subscription health get", func(tx queryer) error {
		var (
			failures, day, att, ok, prevAtt, prevOK sql.NullInt64
			since                                   sql.NullInt64
		)
		err := tx.QueryRowContext(ctx, `SELECT h.consecutive_failures, h.failing_since, h.day, h.attempts,
			h.successes, h.prev_attempts, h.prev_successes
			FROM subscriptions s LEFT JOIN subscription_health h ON h.subscription_id = s.id
			WHERE s.id = ? AND s.deleted_at IS NULL`, params.ID).Scan(&failures, &since, &day, &att, &ok, &prevAtt, &prevOK)
		if errors.Is(err, sql.ErrNoRows) {
			return herald.NotFoundf("subscription %s not found", params.ID)
		}
		if err != nil {
			return err
		}
		if !day.Valid {
			return nil // never attempted
		}
		h.ConsecutiveFailures = int(failures.Int64)
		if since.Valid {
			t := fromMS(since.Int64)
			h.FailingSince = &t
		}
		store.HealthEstimate(h, store.HealthCounts{Day: day.Int64, Attempts: att.Int64, Successes: ok.Int64,
			PrevAttempts: prevAtt.Int64, PrevOK: prevOK.Int64}, params.Now)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}
