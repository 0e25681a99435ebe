package herald

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactHeader(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, value, want string }{
		{"Authorization", "Bearer x", MaskedCredential},
		{"cookie", "a=b", MaskedCredential},
		{"Set-Cookie", "a=b", MaskedCredential},
		{"X-Webhook-Secret", "s", MaskedCredential},
		{"webhook-signature", "v1,abc= v1a,def=", "v1,*** v1a,***"},
		{"Webhook-Signature", "garbage", "?,***"},
		{"webhook-signature", "v1,*** v1,***", "v1,*** v1,***"},
		{"x-plain", "visible", "visible"},
		{"Authorization", "", ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, RedactHeader(tt.name, tt.value), tt.name)
	}
}

func TestBoundHeaders(t *testing.T) {
	t.Parallel()
	require.Nil(t, BoundHeaders(nil))
	require.NotNil(t, BoundHeaders(map[string]string{}))
	require.Nil(t, AttemptHeaders(nil))

	h := map[string]string{"X-A": "1", "x-a": "2", "X-Long": strings.Repeat("é", 400), strings.Repeat("n", 600): "v"}
	for i := range 50 {
		h[fmt.Sprintf("x-many-%02d", i)] = strings.Repeat("v", 300)
	}
	got := BoundHeaders(h)
	// x-a 4 bytes, x-long 518, then 24 x-many of 309: 7,938; a 25th passes 8 KiB.
	require.Len(t, got, 26, "8 KiB cuts before 32 headers")
	require.Equal(t, "1", got["x-a"], "of two spellings, the first in byte order wins")
	require.Len(t, got["x-long"], AttemptHeaderValueMax, "cut on a character boundary: 256 two-byte characters")
	total := 0
	for n, v := range got {
		total += len(n) + len(v)
	}
	require.LessOrEqual(t, total, AttemptHeadersBytesMax)
	require.True(t, maps.Equal(got, BoundHeaders(got)), "bounding twice changes nothing")

	few := map[string]string{}
	for i := range 40 {
		few[fmt.Sprintf("h%02d", i)] = "v"
	}
	require.Len(t, BoundHeaders(few), AttemptHeadersMax)
	require.Equal(t, map[string]string{"x-m": "a, b"}, AttemptHeaders(map[string][]string{"X-M": {"a", "b"}}))
}

// The headers of one webhook attempt, as the Sender records them: what it
// sent (http.Header's canonical names) and a receiver's usual answer.
func BenchmarkAttemptHeaders(b *testing.B) {
	sent := map[string][]string{
		"Content-Type":      {"application/json"},
		"User-Agent":        {"herald/1.0"},
		"Webhook-Id":        {"evt_01JEXAMPLE00000000000000"},
		"Webhook-Timestamp": {"1764800000"},
		"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
		"Herald-Attempt":    {"1"},
		"Host":              {"127.0.0.1:8080"},
		"Content-Length":    {"1024"},
	}
	answer := map[string][]string{
		"Content-Length": {"0"},
		"Date":           {"Fri, 04 Dec 2026 01:50:00 GMT"},
		"Content-Type":   {"text/plain; charset=utf-8"},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = AttemptHeaders(sent)
		_ = AttemptHeaders(answer)
	}
}
