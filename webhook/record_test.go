package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// Both request paths (direct HTTP/1.1 and net/http's Transport) record the
// headers sent and received, redacted; a refused connection records the
// request only; an unbuildable request records neither.
func TestSendRecordsHeaders(t *testing.T) {
	t.Parallel()
	for _, std := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "transport"}[std], func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Set-Cookie", "sid=1")
				w.Header().Add("X-Many", "a")
				w.Header().Add("X-Many", "b")
				w.WriteHeader(http.StatusAccepted)
			})
			b.sender = NewSender(Config{Guard: &Guard{AllowLoopback: true}, StdTransport: std})
			t.Cleanup(b.sender.Close)
			req := testRequest(strings.Replace(b.server.URL, "http://", "http://user:pw@", 1))
			req.Headers = map[string]string{"X-Api-Key": "k", "X-Plain": "p"}
			res := b.sender.Send(t.Context(), req)
			require.True(t, res.Success, res.Message)
			got := <-b.requests

			sent := res.RequestHeaders
			require.Equal(t, herald.MaskedCredential, sent["authorization"], "basic auth from the URL, redacted")
			require.NotEmpty(t, got.header.Get("Authorization"))
			require.Equal(t, herald.MaskedCredential, sent["x-api-key"])
			require.Equal(t, "p", sent["x-plain"])
			require.Equal(t, "v1,***", sent[HeaderSignature])
			require.Equal(t, got.header.Get(HeaderTimestamp), sent[HeaderTimestamp])
			require.Equal(t, "3", sent["herald-attempt"])
			require.Equal(t, got.host, sent["host"])
			require.Equal(t, strconv.Itoa(len(got.body)), sent["content-length"])

			require.Equal(t, herald.MaskedCredential, res.ResponseHeaders["set-cookie"])
			require.Equal(t, "a, b", res.ResponseHeaders["x-many"])
		})
	}

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		b := setupSender(t, nil)
		url := b.server.URL
		b.server.Close()
		res := b.sender.Send(t.Context(), testRequest(url))
		require.False(t, res.Success)
		require.Equal(t, "3", res.RequestHeaders["herald-attempt"])
		require.Nil(t, res.ResponseHeaders, "no answer")
	})

	t.Run("Unbuildable", func(t *testing.T) {
		t.Parallel()
		b := setupSender(t, nil)
		req := testRequest(b.server.URL)
		req.Method = "GET"
		res := b.sender.Send(t.Context(), req)
		require.Equal(t, herald.ErrorInvalidRequest, res.Class)
		require.Nil(t, res.RequestHeaders)
		require.Nil(t, res.ResponseHeaders)
	})
}
