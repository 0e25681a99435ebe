package bench

import (
	"context"
	"net/http"
	"testing"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testbroker"
)

// aimAtHerald points a broker's raw publisher at the destination herald
// delivers to, so the consumer can be tested without a node.
func aimAtHerald(t *testing.T, b broker) {
	t.Helper()
	switch b := b.(type) {
	case *amqpBroker:
		b.rawQueue = b.queue
	case *natsBroker:
		b.rawSubj = b.subject
	case *redisBroker:
		b.rawStream = b.stream
	case *mqttBroker:
		b.rawTopic = b.topic
	default:
		t.Fatalf("no raw target for %T", b)
	}
}

// Every broker type: the raw phase publishes-with-ack the number of
// messages asked for, and the consumer receives messages shaped like
// herald's at the destination the subscription names, once each, with
// their stamp read back for the latency.
func TestBrokerRawAndConsumer(t *testing.T) {
	t.Parallel()
	for _, k := range []testbroker.Kind{testbroker.AMQP, testbroker.NATS, testbroker.Redis, testbroker.MQTT} {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			u := testbroker.URL(t, k)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			run := randomHex(4)
			b, err := newBroker(ctx, string(k), u, run, 4)
			require.NoError(t, err)
			t.Cleanup(b.close)
			body := ceilingBody("bench."+run, Pad(256))

			raw := runRaw(ctx, b, body, 4, 100, 30*time.Second)
			require.Empty(t, raw.Error)
			require.EqualValues(t, 100, raw.Messages)
			require.Positive(t, raw.PerSecond)
			require.LessOrEqual(t, raw.P50Ms, raw.P99Ms)

			require.Equal(t, string(k), b.connection("c").Type)
			require.True(t, b.connection("c").Tenants.All)
			require.Equal(t, string(k), b.destination("c").Type)
			require.Equal(t, "c", *b.destination("c").Connection)

			a := newArrivals()
			require.NoError(t, b.consume(ctx, a))
			aimAtHerald(t, b)
			require.Empty(t, runRaw(ctx, b, body, 2, 20, 30*time.Second).Error)
			require.Eventually(t, func() bool { return a.Delivered() >= 20 }, 30*time.Second, 10*time.Millisecond)
			require.Zero(t, a.duplicates.Load())
			require.Zero(t, a.invalid.Load(), "every message's body carries its stamp")
			require.Equal(t, 20, a.Latency().Mark())
			require.False(t, a.LastDelivered().IsZero())
		})
	}
}

// The push service answers 201, keeps each message and decrypts it after
// the run with the subscription keys it handed out: here what webpush-go
// (RFC 8291, padded to 4 KiB) sends.
func TestPushService(t *testing.T) {
	t.Parallel()
	s, err := newPushService(randomHex(4))
	require.NoError(t, err)
	t.Cleanup(s.close)
	a := newArrivals()
	require.NoError(t, s.consume(t.Context(), a))
	require.Nil(t, s.connection("x"))
	sub := s.destination("").Subscription

	vapidPriv, vapidPub, err := webpush.GenerateVAPIDKeys()
	require.NoError(t, err)
	for range 3 {
		resp, err := webpush.SendNotification(EventBody("bench.x", time.Now(), Pad(100)), &webpush.Subscription{
			Endpoint: sub.Endpoint, Keys: webpush.Keys{P256dh: sub.Keys.P256DH, Auth: sub.Keys.Auth},
		}, &webpush.Options{Subscriber: "ops@example.test", VAPIDPublicKey: vapidPub, VAPIDPrivateKey: vapidPriv, TTL: 60})
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
	}
	require.EqualValues(t, 3, a.Delivered())
	a.finish()
	require.Zero(t, a.invalid.Load())
	require.Equal(t, 3, a.Latency().Mark())

	// A body that is not for these keys does not count as a latency.
	a.arrivedSealed(make([]byte, 300), time.Now())
	a.finish()
	require.EqualValues(t, 1, a.invalid.Load())

	raw := runRaw(t.Context(), s, EventBody("bench.x", time.Now(), Pad(100)), 2, 10, 10*time.Second)
	require.Empty(t, raw.Error)
	require.EqualValues(t, 10, raw.Messages)
}
