package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// Attempt headers (migration 018): an attempt keeps the headers it sent and
// received, bounded and redacted by the store whoever built them, and an
// attempt without them reads back without them (nil, not empty).
func testAttemptHeaders(t *testing.T, newStore NewStoreFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])

		out := delivered(c, ownerA, now)
		out.Attempt.RequestHeaders = map[string]string{
			"content-type":      "application/json",
			"webhook-id":        ids[0],
			"webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,ZGlmZmVyZW50",
			"x-tenant":          "acme",
		}
		out.Attempt.ResponseHeaders = map[string]string{} // answered with no headers
		b.complete(t, now, out)

		got := b.attempts(t, ids[0])
		require.Len(t, got, 1)
		require.Equal(t, map[string]string{
			"content-type":      "application/json",
			"webhook-id":        ids[0],
			"webhook-signature": "v1,*** v1,***",
			"x-tenant":          "acme",
		}, got[0].RequestHeaders)
		require.NotNil(t, got[0].ResponseHeaders, "recorded empty is not unrecorded")
		require.Empty(t, got[0].ResponseHeaders)
	})

	t.Run("NotRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		b.complete(t, now, delivered(c, ownerA, now))
		got := b.attempts(t, ids[0])
		require.Len(t, got, 1)
		require.Nil(t, got[0].RequestHeaders, "no headers given: none recorded (as before migration 018)")
		require.Nil(t, got[0].ResponseHeaders)
	})

	t.Run("RedactedAndBounded", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])

		sent := map[string]string{
			"Authorization": "Bearer sk_live_123",
			"Cookie":        "session=abc",
			"X-Api-Key":     "k-123",
			"X-Long":        strings.Repeat("é", 600), // 1200 bytes
			"X-Bad":         "a\x00b\xffc",
		}
		for i := range 40 {
			sent[fmt.Sprintf("X-Many-%02d", i)] = strings.Repeat("v", 400)
		}
		replied := map[string]string{"Set-Cookie": "sid=secret; HttpOnly", "Server": "test"}
		out := retried(c, ownerA, now, now.Add(5*time.Second))
		out.Attempt.RequestHeaders, out.Attempt.ResponseHeaders = sent, replied
		b.complete(t, now, out)

		got := b.attempts(t, ids[0])[0]
		req := got.RequestHeaders
		require.Equal(t, herald.MaskedCredential, req["authorization"])
		require.Equal(t, herald.MaskedCredential, req["cookie"])
		require.Equal(t, herald.MaskedCredential, req["x-api-key"])
		require.Equal(t, "a\uFFFDb\uFFFDc", req["x-bad"])
		require.LessOrEqual(t, len(req), herald.AttemptHeadersMax)
		total := 0
		for name, v := range req {
			require.Equal(t, strings.ToLower(name), name)
			require.LessOrEqual(t, len(v), herald.AttemptHeaderValueMax, name)
			require.NotContains(t, v, "sk_live", name)
			total += len(name) + len(v)
		}
		require.LessOrEqual(t, total, herald.AttemptHeadersBytesMax)
		require.Less(t, len(req), len(sent), "some headers were left out")
		require.Equal(t, map[string]string{"set-cookie": herald.MaskedCredential, "server": "test"}, got.ResponseHeaders)
	})
}
