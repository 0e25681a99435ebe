package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/store"
)

// cancelOrphanedSQL cancels the unfinished deliveries of deleted or unknown
// subscriptions, as SubscriptionDelete cancels a subscription's own. It
// reads only the queue partition (deliveries_active).
const cancelOrphanedSQL = `UPDATE deliveries d SET state = 'cancelled', next_attempt_at = NULL,
	lease_owner = NULL, lease_until = NULL, updated_at = $1
	WHERE d.state IN ('pending', 'in_flight')
	  AND NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = d.subscription_id AND s.deleted_at IS NULL)`

// DeliveryCancelOrphaned cancels unfinished deliveries no subscription can
// claim any more.
func (s *Store) DeliveryCancelOrphaned(ctx context.Context, params *store.DeliveryCancelOrphanedParams) (int, error) {
	const op = "error cancelling orphaned deliveries"
	db, err := s.db(op)
	if err != nil {
		return 0, err
	}
	tag, err := execMoved(ctx, db, cancelOrphanedSQL, ms(params.Now))
	if err != nil {
		return 0, mapErr(op, err)
	}
	return int(tag.RowsAffected()), nil
}

// tierClampSQL moves the unfinished deliveries of tiers above $1 to tier $1
// and returns how many left each tier. The rows stay in their partition
// (the state does not change).
const tierClampSQL = `
WITH old AS (
	SELECT id, state, tier FROM deliveries
	WHERE state IN ('pending', 'in_flight') AND tier > $1
	FOR UPDATE
), moved AS (
	UPDATE deliveries d SET tier = $1, updated_at = $2
	FROM old WHERE d.id = old.id AND d.state = old.state
	RETURNING old.tier
)
SELECT tier, count(*)::int FROM moved GROUP BY tier ORDER BY tier`

// DeliveryTierClamp moves deliveries of removed tiers to the last one.
func (s *Store) DeliveryTierClamp(ctx context.Context, params *store.DeliveryTierClampParams) (*store.DeliveryTierClampResult, error) {
	const op = "error moving deliveries of removed tiers"
	if err := params.Validate(); err != nil {
		return nil, err
	}
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	res := &store.DeliveryTierClampResult{To: params.Tiers - 1}
	// One statement, an implicit transaction: retried whole when a row it
	// waited for finished meanwhile (moved partition).
	err = retryMoved(ctx, func() error {
		res.Moved = map[int]int{}
		rows, err := db.Query(ctx, tierClampSQL, res.To, ms(params.Now))
		if err != nil {
			return err
		}
		var tier, n int
		_, err = pgx.ForEachRow(rows, []any{&tier, &n}, func() error {
			res.Moved[tier] = n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	s.notifyIf(res.Total() > 0) // wake other nodes (notify.go)
	return res, nil
}
