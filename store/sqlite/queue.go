package sqlite

import (
	"context"

	"github.com/heraldhq/herald/store"
)

// unfinishedStates are the states whose rows the partial indexes
// deliveries_pending and deliveries_in_flight hold. Statements over the
// queue run once per state with "state = ?" spelled out, so SQLite uses
// those indexes instead of scanning the history.
var unfinishedStates = []string{"pending", "in_flight"}

// DeliveryCancelOrphaned cancels the unfinished deliveries of deleted or
// unknown subscriptions, as SubscriptionDelete cancels a subscription's own.
func (s *Store) DeliveryCancelOrphaned(ctx context.Context, params *store.DeliveryCancelOrphanedParams) (int, error) {
	now := ms(params.Now)
	var total int64
	err := s.queueTx(ctx, "delivery cancel orphaned", func(tx queryer) error {
		total = 0
		for _, state := range unfinishedStates {
			res, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'cancelled', next_attempt_at = NULL,
				lease_owner = NULL, lease_until = NULL, updated_at = ?
				WHERE state = '`+state+`' AND NOT EXISTS (SELECT 1 FROM subscriptions s
					WHERE s.id = deliveries.subscription_id AND s.deleted_at IS NULL)`, now)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	return int(total), err
}

// DeliveryTierClamp moves the unfinished deliveries of tiers >= Tiers to
// tier Tiers-1.
func (s *Store) DeliveryTierClamp(ctx context.Context, params *store.DeliveryTierClampParams) (*store.DeliveryTierClampResult, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	res := &store.DeliveryTierClampResult{To: params.Tiers - 1}
	now := ms(params.Now)
	err := s.writeTx(ctx, "delivery tier clamp", func(tx queryer) error {
		res.Moved = map[int]int{}
		for _, state := range unfinishedStates {
			rows, err := tx.QueryContext(ctx, `SELECT tier, COUNT(*) FROM deliveries
				WHERE state = '`+state+`' AND tier > ? GROUP BY tier`, res.To)
			if err != nil {
				return err
			}
			for rows.Next() {
				var tier, n int
				if err := rows.Scan(&tier, &n); err != nil {
					rows.Close()
					return err
				}
				res.Moved[tier] += n
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET tier = ?, updated_at = ?
				WHERE state = '`+state+`' AND tier > ?`, res.To, now, res.To); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
