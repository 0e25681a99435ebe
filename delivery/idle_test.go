package delivery_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// claimCounter counts the claims an engine makes, per tier.
type claimCounter struct {
	store.Store
	claims [2]atomic.Int64
}

func (c *claimCounter) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	if p.Tier < len(c.claims) {
		c.claims[p.Tier].Add(1)
	}
	return c.Store.DeliveryClaim(ctx, p)
}

// TestIdleTierChecksLessOften: a tier with nothing pending backs its
// checks off from PollInterval to IdlePollInterval, so an idle node does
// not query the store per tier per PollInterval (issue 26) — and work
// published after a long idle spell is still delivered at once, woken by
// its commit, not by the check.
func TestIdleTierChecksLessOften(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		cs := &claimCounter{Store: s}
		// IdlePollInterval of a minute: only a wake-up delivers the work
		// published below within the test's deadline.
		const poll, idlePoll = 20 * time.Millisecond, time.Minute
		fanout := ingest.NewFanout(cs, nil)
		engine := delivery.New(delivery.Config{
			Store: cs, Fanout: fanout, Tiers: delivery.Tiers{0, time.Hour}, Workers: 4,
			Sender:       webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
			PollInterval: poll, IdlePollInterval: idlePoll, RebalanceInterval: time.Hour, RescueInterval: time.Hour,
		})
		ing := ingest.New(ingest.Config{Store: cs, Fanout: fanout, OnCommit: engine.Notify, Dispatcher: engine})
		ing.Start()
		engine.Start()
		t.Cleanup(func() {
			ing.Close()
			engine.Stop()
		})

		// Idle for 1.5 s: at a check per PollInterval that is ~75 claims
		// per tier; backing off (20, 40, 80, 160, 320, 640… ms) ~7.
		time.Sleep(1500 * time.Millisecond)
		for tier := range cs.claims {
			n := cs.claims[tier].Load()
			require.Positive(t, n, "tier %d still checks", tier)
			require.LessOrEqual(t, n, int64(15), "tier %d checked %d times in 1.5 s while empty", tier, n)
		}

		// Work after the idle spell: delivered without waiting for the
		// next check.
		secret := webhook.NewSecret()
		r := newReceiver(t, secret)
		sub := createSub(t, cs, r.srv.URL, time.Second, []string{"idle.*"}, secret)
		require.NoError(t, fanout.Refresh(ctx))
		publish(t, ing, "idle.work", nil)
		finished(t, cs, sub.ID, 1) // its deadline is well under idlePoll
	})
}
