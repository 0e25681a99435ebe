package store_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func TestAttemptHeadersEncoding(t *testing.T) {
	t.Parallel()
	require.Nil(t, store.EncodeAttemptHeaders(nil))
	got, err := store.DecodeAttemptHeaders(nil)
	require.NoError(t, err)
	require.Nil(t, got)

	for _, h := range []map[string]string{
		{},
		{"a": `quote " and \ backslash`, "b": "<html> & \u2028 é", "x-tab": "a\tb"},
		{"Authorization": "Bearer x", "X-Upper": "v"},
	} {
		enc := store.EncodeAttemptHeaders(h)
		require.NotNil(t, enc)
		want, err := json.Marshal(herald.BoundHeaders(h))
		require.NoError(t, err)
		require.JSONEq(t, string(want), *enc, "the hand-written encoding is JSON")
		back, err := store.DecodeAttemptHeaders(enc)
		require.NoError(t, err)
		require.Equal(t, herald.BoundHeaders(h), back)
	}
}

var benchSent = map[string]string{
	"content-length": "137", "content-type": "application/json", "herald-attempt": "1",
	"herald-event-type": "order.created", "herald-subscription-id": "sub_01m8ef3hze7h6vzbanentv8yzw",
	"host": "hooks.example.com", "user-agent": "herald-webhooks/1", "webhook-id": "dlv_01m8ef3m49a4hmayj9dz08c4r2",
	"webhook-signature": "v1,***", "webhook-timestamp": "1795781939", "x-tenant": "acme",
}

// BenchmarkEncodeAttemptHeaders is the store's per-attempt encoding of a
// webhook's request headers (already bounded by the Sender).
func BenchmarkEncodeAttemptHeaders(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = store.EncodeAttemptHeaders(benchSent)
	}
}
