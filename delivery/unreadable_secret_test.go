package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// unreadableStore marks the secrets of one subscription Unreadable, as
// the stores do when a secret does not decrypt with the configured keys
// (store.SecretOpen), on both paths that load secrets: claims and the
// fan-out cache that direct dispatch signs from.
type unreadableStore struct {
	store.Store
	subID string
}

func (s *unreadableStore) mark(secs []herald.Secret) {
	for i := range secs {
		secs[i].Value, secs[i].Unreadable = "", true
	}
}

func (s *unreadableStore) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	claimed, err := s.Store.DeliveryClaim(ctx, p)
	for _, c := range claimed {
		if c.Delivery.SubscriptionID == s.subID {
			s.mark(c.Secrets)
		}
	}
	return claimed, err
}

func (s *unreadableStore) SubscriptionListAll(ctx context.Context) (*store.SubscriptionListAllResult, error) {
	res, err := s.Store.SubscriptionListAll(ctx)
	if res != nil {
		s.mark(res.Secrets[s.subID])
	}
	return res, err
}

// TestUnreadableSecretIsolated: a subscription whose secret does not
// decrypt sends nothing (no request signed with fewer secrets than the
// receiver expects); its deliveries fail with secret_unreadable through
// the tiers into the dead letters, and another subscription of the same
// event type is delivered as usual.
func TestUnreadableSecretIsolated(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		badRecv, goodRecv := newReceiver(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), newReceiver(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		bad := createSub(t, s, badRecv.srv.URL, time.Second, []string{"x.*"}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		good := createSub(t, s, goodRecv.srv.URL, time.Second, []string{"x.*"}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		h := setup(t, &unreadableStore{Store: s, subID: bad.ID}, delivery.Tiers{0, 10 * time.Millisecond})

		var ids []string
		for range 5 {
			ids = append(ids, publish(t, h.ing, "x.created", nil))
		}
		okd := finished(t, s, good.ID, len(ids))
		dead := finished(t, s, bad.ID, len(ids))
		for _, id := range ids {
			require.Equal(t, herald.DeliveryDelivered, okd[id].State)
			require.Equal(t, herald.DeliveryDead, dead[id].State)
			require.Equal(t, herald.ErrorSecretUnreadable, dead[id].LastError)
		}
		require.Len(t, goodRecv.acceptedCopy(), len(ids))
		badRecv.mu.Lock()
		require.Empty(t, badRecv.seen, "nothing is sent with an unreadable secret")
		badRecv.mu.Unlock()
	})
}
