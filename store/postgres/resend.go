package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/heraldhq/herald/store"
)

// createDeliveriesSQL stores new deliveries of stored events to one
// subscription and bumps their events' delivery_count, in one statement.
// The subscription's row is locked FOR KEY SHARE as insertManySQL locks
// it, so a concurrent SubscriptionDelete either comes first (nothing is
// stored) or waits and cancels the new deliveries. Rows are inserted in
// input order so their publish positions (seq) follow it.
const createDeliveriesSQL = `
WITH live AS (
	SELECT s.id FROM subscriptions s WHERE s.id = $1 AND s.deleted_at IS NULL FOR KEY SHARE
), d AS (
	SELECT d.* FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[])
		WITH ORDINALITY AS d(id, event_id, event_tenant, next_attempt_at, pos)
), dl AS (
	INSERT INTO deliveries (id, event_id, event_tenant, subscription_id, state, tier, next_attempt_at,
		event_key, event_version, created_at, updated_at)
	SELECT d.id, d.event_id, d.event_tenant, live.id, 'pending', 0, d.next_attempt_at, e.key, e.version, $6, $6
	FROM d JOIN events e ON e.id = d.event_id AND e.tenant = d.event_tenant CROSS JOIN live
	ORDER BY d.pos
	RETURNING event_id, event_tenant
), counted AS (
	UPDATE events e SET delivery_count = e.delivery_count + c.n
	FROM (SELECT event_id, event_tenant, count(*)::int AS n FROM dl GROUP BY event_id, event_tenant) c
	WHERE e.id = c.event_id AND e.tenant = c.event_tenant
)
SELECT count(*)::int FROM dl`

// DeliveryCreateMany stores new deliveries of stored events to one
// subscription (resend, replay).
func (s *Store) DeliveryCreateMany(ctx context.Context, params *store.DeliveryCreateManyParams) (int, error) {
	const op = "error creating deliveries"
	if params.SubscriptionID == "" {
		return 0, errors.New("postgres: delivery create many: SubscriptionID is required")
	}
	if len(params.Deliveries) == 0 {
		return 0, nil
	}
	db, err := s.db(op)
	if err != nil {
		return 0, err
	}
	n := len(params.Deliveries)
	ids, events, tenants := make([]string, n), make([]string, n), make([]string, n)
	next := make([]time.Time, n)
	for i, d := range params.Deliveries {
		ids[i], events[i], tenants[i], next[i] = d.ID, d.Event.ID, d.Event.Tenant, ms(d.NextAttemptAt)
	}
	var stored int
	err = retryMoved(ctx, func() error {
		return db.QueryRow(ctx, createDeliveriesSQL, params.SubscriptionID, ids, events, tenants, next,
			ms(params.Now)).Scan(&stored)
	})
	if err != nil {
		return 0, mapErr(op, err)
	}
	s.notifyIf(stored > 0) // wake other nodes (notify.go)
	return stored, nil
}
