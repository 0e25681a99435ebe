package webpushdest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/destination/desttest"
	"github.com/heraldhq/herald/push"
)

// harness adapts Web Push to desttest: each Target is a test push service
// of its own (httptest) for a fresh user agent's keys; it checks the
// VAPID Authorization for its origin, decrypts each message with the
// independent RFC 8291 receiver (decrypt, ece_test.go) and hands the
// plaintext to the Consumer, as the browser's service worker would get
// it. A message it cannot check or open is answered 400, so the send
// fails with the reason instead of the suite waiting for it.
type harness struct{ vapid *VAPIDKey }

var _ desttest.Unsigned = (*harness)(nil)

func (h *harness) Type() herald.DestinationType { return herald.DestinationWebPush }

// Unsigned: the browser gets the payload alone.
func (h *harness) Unsigned() string {
	return "a Web Push message reaches the browser as its encrypted body alone: no webhook-* or herald-* headers"
}

// Publisher allows http:// endpoints and loopback (--dev), where the test
// push services listen.
func (h *harness) Publisher(t *testing.T) destination.Publisher {
	return newTestPublisher(t, h.vapid, true)
}

// messages is a Target's Consumer: the plaintexts its push service
// accepted, in order.
type messages chan *desttest.Received

func (c messages) Next(ctx context.Context) (*desttest.Received, error) {
	select {
	case m := <-c:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *harness) Target(t *testing.T) (herald.Destination, desttest.Consumer) {
	ua := newUserAgent(t)
	// Larger than any case sends to one Target: the handler never waits
	// on a slow reader.
	got := make(messages, 1000)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := push.ParseVAPID(r.Header, srv.URL, time.Now()); err != nil {
			http.Error(w, "test push service: VAPID: "+err.Error(), http.StatusBadRequest)
			return
		}
		if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
			http.Error(w, "test push service: Content-Encoding "+ce, http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		plain, err := decrypt(ua.priv, ua.auth, body)
		if err != nil {
			http.Error(w, "test push service: cannot decrypt: "+err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case got <- &desttest.Received{Body: plain}:
			w.WriteHeader(http.StatusCreated)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return pushDestination(srv.URL, ua), got
}

// Broken is a push service that refuses every message with 400: rejected,
// permanent (dead after one attempt). Not 404/410, which the engine
// answers by disabling the subscription (TestEngineOutcomes), so later
// deliveries would never finish.
func (h *harness) Broken(t *testing.T) (herald.Destination, herald.ErrorClass, bool) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "test push service: UnauthorizedRegistration", http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	return pushDestination(srv.URL, newUserAgent(t)), herald.ErrorRejected, true
}

func pushDestination(base string, ua *userAgent) herald.Destination {
	return herald.Destination{Type: herald.DestinationWebPush, Subscription: &herald.PushSubscription{
		Endpoint: base + "/wpush/v2/" + herald.NewID(""),
		Keys:     herald.PushKeys{P256DH: ua.p256dh(), Auth: ua.authB64()},
	}}
}

// TestConformance runs the destination suite: everything but the header
// cases, which skip with Unsigned's reason.
func TestConformance(t *testing.T) {
	t.Parallel()
	desttest.Run(t, &harness{vapid: newVAPIDKey(t)})
}
