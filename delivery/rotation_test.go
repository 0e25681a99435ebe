package delivery

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func TestNextRotation(t *testing.T) {
	t.Parallel()
	claim := func(subs ...string) []*store.ClaimedDelivery {
		out := make([]*store.ClaimedDelivery, len(subs))
		for i, s := range subs {
			out[i] = &store.ClaimedDelivery{Delivery: &herald.Delivery{SubscriptionID: s}}
		}
		return out
	}
	tests := []struct {
		name, cursor string
		claimed      []*store.ClaimedDelivery
		want         string
	}{
		{"nothing claimed keeps the cursor", "b", nil, "b"},
		{"single claim moves to it", "", claim("a"), "a"},
		{"full round ends at the last id", "", claim("a", "b", "c"), "c"},
		{"wrap-around: ids at or before the cursor come last", "b", claim("c", "a"), "a"},
		{"partial last round: the subscription with most", "", claim("a", "b", "c", "b"), "b"},
		{"partial round across the wrap", "b", claim("c", "a", "b", "c", "a"), "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, nextRotation(tt.cursor, tt.claimed))
		})
	}
}
