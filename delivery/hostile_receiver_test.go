package delivery_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/internal/testcert"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// nulTLSServer is an HTTPS receiver whose certificate's only DNS name
// holds a NUL byte. Go's x509 quotes certificate names verbatim in a
// HostnameError, so every attempt against https://localhost:port fails with
// an error text that contains NUL.
func nulTLSServer(t *testing.T) (port string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{testcert.NULName(t)}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	return port
}

// generous is the subscriptions' timeout: these tests are about what
// receivers answer, and a loaded machine must not turn an answer into a
// timeout.
const generous = 10 * time.Second

// alertData returns the data of every herald.* event the receiver got.
func alertData(t *testing.T, r *receiver) []map[string]any {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, b := range r.bodies {
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		require.NoError(t, json.Unmarshal(b, &ev))
		require.True(t, herald.IsSystemEventType(ev.Type), "%s", b)
		ev.Data["type"] = ev.Type
		out = append(out, ev.Data)
	}
	return out
}

// A receiver whose TLS error text holds a NUL poisons nothing, on either
// store: its delivery dies with a clean message, the dead-letter alert
// carries that clean message, and deliveries to a healthy receiver before
// and after it are all recorded (on PostgreSQL the NUL used to make the
// completer retry one refused batch forever, so nothing was recorded after
// it).
func TestHostileTLSReceiverPoisonsNothing(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		h := setup(t, s, delivery.Tiers{0})
		secret := webhook.NewSecret()
		good := newReceiver(t, secret)
		goodSub := createSub(t, s, good.srv.URL, generous, []string{"good.*"}, secret)
		hostileURL := "https://localhost:" + nulTLSServer(t) + "/hook"
		hostile := createSub(t, s, hostileURL, generous, []string{"hostile.*"}, secret)
		alerts := newReceiver(t, secret)
		alertSub := createSub(t, s, alerts.srv.URL, generous, []string{herald.EventTypeDeliveryDead}, secret)

		for i := 0; i < 5; i++ {
			publish(t, h.ing, "good.before", nil)
		}
		publish(t, h.ing, "hostile.x", nil)
		dead := finished(t, s, hostile.ID, 1)
		for i := 0; i < 20; i++ {
			publish(t, h.ing, "good.after", nil)
		}
		for _, d := range finished(t, s, goodSub.ID, 25) {
			require.Equal(t, herald.DeliveryDelivered, d.State)
		}

		for _, d := range dead {
			require.Equal(t, herald.DeliveryDead, d.State)
			got, err := s.DeliveryGet(context.Background(), d.ID)
			require.NoError(t, err)
			require.Len(t, got.Attempts, 1)
			msg := got.Attempts[0].ErrorMessage
			require.Equal(t, herald.ErrorTLS, got.Attempts[0].Error)
			require.Contains(t, msg, "evil\uFFFD.example", "the certificate name is kept, cleaned")
			require.True(t, herald.IsCleanText(msg) && utf8.ValidString(msg), "%q", msg)
		}

		finished(t, s, alertSub.ID, 1)
		data := alertData(t, alerts)
		require.Len(t, data, 1)
		msg, _ := data[0]["error_message"].(string)
		require.Contains(t, msg, "evil\uFFFD.example")
		require.NotContains(t, msg, "\x00")
	})
}

// herald's own events go to every herald.* subscriber: they name the
// subscription's URL without its userinfo, query or fragment, where
// endpoints carry credentials.
func TestAlertEventsRedactURL(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		h := setup(t, s, delivery.Tiers{0})
		secret := webhook.NewSecret()
		recv := newReceiver(t, secret)
		// recv.srv.URL is http://127.0.0.1:port
		withSecrets := func(path string) string {
			return strings.Replace(recv.srv.URL, "http://", "http://alice:s3cr3t-pass@", 1) + path + "?token=s3cr3t-token&x=1#s3cr3t-frag"
		}
		gone := createSub(t, s, withSecrets("/gone"), generous, []string{"gone.*"}, secret)
		failing := createSub(t, s, withSecrets("/fail"), generous, []string{"fail.*"}, secret)
		alerts := newReceiver(t, secret)
		alertSub := createSub(t, s, alerts.srv.URL, generous, []string{"herald.*"}, secret)

		publish(t, h.ing, "gone.now", []step{{Status: http.StatusGone}})
		publish(t, h.ing, "fail.now", []step{{Status: http.StatusInternalServerError}})
		finished(t, s, gone.ID, 1)
		finished(t, s, failing.ID, 1)
		finished(t, s, alertSub.ID, 2) // disabled (410), dead (500)

		byType := map[string][]string{}
		for _, d := range alertData(t, alerts) {
			u, _ := d["url"].(string)
			byType[d["type"].(string)] = append(byType[d["type"].(string)], u)
		}
		base := recv.srv.URL
		require.ElementsMatch(t, []string{base + "/gone"}, byType[herald.EventTypeSubscriptionDisabled])
		require.ElementsMatch(t, []string{base + "/fail"}, byType[herald.EventTypeDeliveryDead],
			"a 410 dies without a dead-letter alert; the 500 raises one")
		alerts.mu.Lock()
		defer alerts.mu.Unlock()
		for _, b := range alerts.bodies {
			require.NotContains(t, string(b), "s3cr3t")
			require.NotContains(t, string(b), "alice")
		}
	})
}
