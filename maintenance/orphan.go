package maintenance

import (
	"context"
	"fmt"

	"github.com/heraldhq/herald/store"
)

// CancelOrphaned cancels unfinished deliveries of deleted subscriptions
// (store.DeliveryCancelOrphaned): no loop can claim them, and left alone
// they would keep their events from retention. The store stops new ones
// from appearing, except when a node dies between the two transactions
// of a PostgreSQL subscription delete; this clears those and what a
// database written by an older herald holds. Start runs it once on every
// node, then the leader every SweepInterval.
func (m *Maintainer) CancelOrphaned(ctx context.Context) (int, error) {
	n, err := m.cfg.Store.DeliveryCancelOrphaned(ctx, &store.DeliveryCancelOrphanedParams{Now: m.cfg.Now().UTC()})
	if err != nil {
		return 0, fmt.Errorf("error cancelling deliveries of deleted subscriptions: %w", err)
	}
	if n > 0 {
		m.cfg.Logger.Info("cancelled deliveries of deleted subscriptions", "count", n)
	}
	return n, nil
}
