package delivery

import (
	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// freesKey reports whether completing c frees a key (fifo/latest with an
// event key). The store does not report a delivery blocked by its key as
// due (DeliveryNextDue), so the completion that frees the key wakes every
// tier: the key's next delivery may wait in any of them.
func freesKey(c *store.ClaimedDelivery) bool {
	if c.Subscription == nil || c.Delivery.EventKey == "" {
		return false
	}
	o := c.Subscription.Ordering
	return o == herald.OrderingFIFO || o == herald.OrderingLatest
}
