package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// DeliveryWaitingFor says why a pending delivery is not sent at Now: its
// key (fifo/latest: held, an earlier delivery first, or the key interval)
// or its tier's maturity. One read-only transaction (a consistent
// snapshot); the key is planned with the claim's rule (store.PlanKey).
func (s *Store) DeliveryWaitingFor(ctx context.Context, params *store.DeliveryWaitingForParams) (store.WaitingFor, error) {
	var out store.WaitingFor
	if s.closed.Load() {
		return out, unavailable("error reading delivery wait", errors.New("store closed"))
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var (
			ordering   string
			intervalMS int64
		)
		d, err := scanDelivery(tx.QueryRow(ctx, `SELECT `+prefixedColumns("d", deliveryColumns)+`, s.ordering, s.key_interval_ms
			FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id WHERE d.id = $1`, params.ID),
			&ordering, &intervalMS)
		if errors.Is(err, pgx.ErrNoRows) {
			return herald.NotFoundf("delivery %s not found", params.ID)
		}
		if err != nil || d.State != herald.DeliveryPending {
			return err
		}
		var plan *store.KeyPlan
		o := herald.Ordering(ordering)
		if d.EventKey != "" && (o == herald.OrderingFIFO || o == herald.OrderingLatest) {
			st, err := readKeyState(ctx, tx, d.SubscriptionID, d.EventKey)
			if err != nil {
				return err
			}
			rows, err := readKeyDeliveries(ctx, tx, d.SubscriptionID, []string{d.EventKey})
			if err != nil {
				return err
			}
			p := store.PlanKey(o, msDuration(intervalMS), st, rows[d.EventKey], params.Now)
			plan = &p
		}
		out = store.WaitingReason(d, plan, params.Now)
		if out == store.WaitingForNothing {
			// Due and free to go as far as its key goes: the
			// subscription's throttle may still hold it (throttle.go).
			out, err = throttleWaitingFor(ctx, tx, d.SubscriptionID, params.Now)
		}
		return err
	})
	return out, mapErr("error reading delivery wait", err)
}
