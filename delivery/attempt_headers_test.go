package delivery_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// A webhook attempt stores the headers the receiver really got and the
// headers it really answered with (issue 24 item 17), credentials redacted:
// the subscription's Authorization, the signature's value, Set-Cookie.
func TestAttemptStoresRealHeaders(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		h := setup(t, s, delivery.Tiers{0, 100 * time.Millisecond})
		secret := webhook.NewSecret()

		var (
			mu  sync.Mutex
			got []http.Header
		)
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			mu.Lock()
			got = append(got, r.Header.Clone())
			n := len(got)
			mu.Unlock()
			w.Header().Set("X-Receiver", "attempt-"+strings.Repeat("!", n))
			w.Header().Set("Set-Cookie", "sid=receiver-secret; HttpOnly")
			if n == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(recv.Close)

		sub := createSub(t, s, recv.URL, time.Second, []string{"hdr.*"}, secret)
		sub.Headers = map[string]string{"X-Tenant": "acme", "Authorization": "Bearer sub-secret"}
		_, err := s.SubscriptionUpdate(context.Background(), &store.SubscriptionUpdateParams{Subscription: sub, Now: time.Now()})
		require.NoError(t, err)

		publish(t, h.ing, "hdr.sent", nil)
		var id string
		for _, d := range finished(t, s, sub.ID, 1) {
			require.Equal(t, herald.DeliveryDelivered, d.State)
			id = d.ID
		}
		res, err := s.DeliveryGet(context.Background(), id)
		require.NoError(t, err)
		require.Len(t, res.Attempts, 2)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, got, 2)

		for i, a := range res.Attempts {
			// Every header the receiver got is stored, under its
			// lower-case name, with its real value unless it is a
			// credential.
			want := map[string]string{}
			for name, vs := range got[i] {
				want[strings.ToLower(name)] = strings.Join(vs, ", ")
			}
			require.Equal(t, "Bearer sub-secret", want["authorization"], "the receiver got the credential")
			want["authorization"] = herald.MaskedCredential
			require.True(t, strings.HasPrefix(want["webhook-signature"], "v1,"))
			want["webhook-signature"] = "v1,***"
			want["host"] = strings.TrimPrefix(recv.URL, "http://")
			if _, ok := want["content-length"]; !ok {
				t.Fatalf("attempt %d: content-length not sent", i+1)
			}
			require.Equal(t, want, a.RequestHeaders, "attempt %d", i+1)
			require.Equal(t, "acme", a.RequestHeaders["x-tenant"])
			require.Equal(t, []string{"1", "2"}[i], a.RequestHeaders["herald-attempt"], "each attempt its own, not a rebuild")

			require.Equal(t, "attempt-"+strings.Repeat("!", i+1), a.ResponseHeaders["x-receiver"])
			require.Equal(t, herald.MaskedCredential, a.ResponseHeaders["set-cookie"])
			require.NotEmpty(t, a.ResponseHeaders["date"])
		}
	})
}
