package sqlite

import (
	"context"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// DeliveryWaitingFor says why a pending delivery is not sent at Now: its
// key (fifo/latest: held, an earlier delivery first, or the key interval)
// or its tier's maturity. One read transaction; the key is planned with
// the same rule the claim uses (store.PlanKey).
func (s *Store) DeliveryWaitingFor(ctx context.Context, params *store.DeliveryWaitingForParams) (store.WaitingFor, error) {
	var out store.WaitingFor
	err := s.readTx(ctx, "delivery waiting for", func(tx queryer) error {
		d, err := getDelivery(ctx, tx, params.ID)
		if err != nil {
			return err
		}
		if d.State != herald.DeliveryPending {
			return nil
		}
		plan, err := waitingPlan(ctx, tx, d, params)
		if err != nil {
			return err
		}
		out = store.WaitingReason(d, plan, params.Now)
		if out == store.WaitingForNothing {
			// Due and free to go as far as its key goes: the
			// subscription's throttle may still hold it (throttle.go).
			out, err = throttleWaitingFor(ctx, tx, d.SubscriptionID, ms(params.Now))
		}
		return err
	})
	return out, err
}

// waitingPlan plans d's key, or returns nil when d is unordered.
func waitingPlan(ctx context.Context, tx queryer, d *herald.Delivery, params *store.DeliveryWaitingForParams) (*store.KeyPlan, error) {
	if d.EventKey == "" {
		return nil, nil
	}
	var (
		ordering   herald.Ordering
		intervalMS int64
	)
	if err := tx.QueryRowContext(ctx, `SELECT ordering, key_interval_ms FROM subscriptions WHERE id = ?`,
		d.SubscriptionID).Scan(&ordering, &intervalMS); err != nil {
		return nil, err
	}
	if ordering != herald.OrderingFIFO && ordering != herald.OrderingLatest {
		return nil, nil
	}
	st, err := readKeyState(ctx, tx, d.SubscriptionID, d.EventKey)
	if err != nil {
		return nil, err
	}
	rows, err := readKeyDeliveries(ctx, tx, d.SubscriptionID, d.EventKey)
	if err != nil {
		return nil, err
	}
	plan := store.PlanKey(ordering, msDuration(intervalMS), st, rows, params.Now)
	return &plan, nil
}
