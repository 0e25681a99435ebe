package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func TestLeaseFor(t *testing.T) {
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	p := &store.DeliveryClaimParams{Now: now, LeaseUntil: now.Add(10 * time.Second), LeaseMargin: 5 * time.Second}
	require.Equal(t, now.Add(35*time.Second), p.LeaseFor(&herald.Subscription{TimeoutMS: 30_000}), "a long timeout outlives LeaseUntil")
	require.Equal(t, now.Add(10*time.Second), p.LeaseFor(&herald.Subscription{TimeoutMS: 1_000}), "LeaseUntil covers a short one")
	require.Equal(t, now.Add(herald.DefaultTimeout+5*time.Second), p.LeaseFor(&herald.Subscription{}), "no timeout means the default")
}
