package mqttsrc_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/source/sourcetest"
)

// A restart of Mosquitto (SIGTERM, persistence on) keeps the session and
// the messages it held, acknowledged or queued: the consumer's Receive
// fails, and the next consumer with its client id gets them all, once
// each, in order. Mosquitto 2.0.11 does not keep the shared subscription
// itself: until the consumer subscribes again a publish reaches nobody
// (PUBACK 0x10), which the harness's publisher retries.
//
// Not parallel: it stops the broker the other tests of this package use
// (they run after it).
func TestSessionSurvivesBrokerRestart(t *testing.T) {
	h := newHarness(t)
	src := newSource(t, h)
	const prefetch = 2
	c := dial(t, h, src, "a", prefetch)
	p := newPublisher(t, h.url)
	for _, m := range numbered("s", 5) {
		p.publish(t, src.Topic, m)
	}
	first := receiveN(t, c, 2, prefetch) // unsettled at the stop; 3 more queued
	require.Equal(t, []string{"s-0", "s-1"}, ids(first))

	errc := make(chan error, 1)
	go func() {
		_, err := c.Receive(context.Background(), prefetch) // held: prefetch unsettled
		errc <- err
	}()
	restartMosquitto(t, h.url, func() {
		select {
		case err := <-errc:
			require.ErrorContains(t, err, "MQTT broker")
		case <-time.After(10 * time.Second):
			t.Fatal("Receive did not fail when the broker stopped")
		}
	})
	require.NoError(t, c.Close())

	// Before any consumer is back the session has no subscription: the
	// first publish is retried until the new consumer subscribed.
	p2 := newPublisher(t, h.url)
	published := make(chan error, 1)
	go func() { published <- p2.send(src.Topic, sourcetest.Msg{Body: []byte(`{"n":5}`), ID: "s-5"}) }()
	c2 := dial(t, h, src, "a", 10)
	require.NoError(t, <-published)
	got := receiveN(t, c2, 6, 10)
	require.Equal(t, []string{"s-0", "s-1", "s-2", "s-3", "s-4", "s-5"}, ids(got))
	settle(t, c2, got, nil)
}
