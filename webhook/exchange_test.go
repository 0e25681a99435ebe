package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/webhook"
)

// TestSenderDo: another destination's request goes through the guarded
// client; the answer is read as a webhook's, and statuses other than 2xx
// are left for the caller to classify.
func TestSenderDo(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			require.Equal(t, "aes128gcm", r.Header.Get("Content-Encoding"))
			require.NotEmpty(t, r.Header.Get("User-Agent"))
			w.Header().Set("Location", "/m/1")
			w.WriteHeader(http.StatusCreated)
		case "/busy":
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/slow":
			time.Sleep(500 * time.Millisecond)
		default:
			w.WriteHeader(http.StatusGone)
			_, _ = w.Write([]byte("gone for good"))
		}
	}))
	t.Cleanup(srv.Close)
	s := webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}})
	t.Cleanup(s.Close)
	do := func(s *webhook.Sender, path string, timeout time.Duration) (webhook.Result, http.Header) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("x"))
		require.NoError(t, err)
		req.Header.Set("Content-Encoding", "aes128gcm")
		return s.Do(t.Context(), req, timeout)
	}

	res, h := do(s, "/ok", time.Second)
	require.True(t, res.Success)
	require.Equal(t, http.StatusCreated, res.Status)
	require.Equal(t, "/m/1", h.Get("Location"))

	res, _ = do(s, "/busy", time.Second)
	require.False(t, res.Success)
	require.Equal(t, 7*time.Second, res.RetryAfter)
	require.Equal(t, herald.ErrorNone, res.Class, "the caller classifies statuses")

	res, _ = do(s, "/gone", time.Second)
	require.Equal(t, http.StatusGone, res.Status)
	require.Equal(t, "gone for good", res.Excerpt)
	require.Equal(t, herald.ErrorNone, res.Class)

	res, h = do(s, "/slow", 100*time.Millisecond)
	require.Equal(t, herald.ErrorTimeout, res.Class)
	require.Nil(t, h)

	guarded := webhook.NewSender(webhook.Config{})
	t.Cleanup(guarded.Close)
	res, _ = do(guarded, "/ok", time.Second)
	require.Equal(t, herald.ErrorDestinationForbidden, res.Class)
	require.NotContains(t, res.Message, "127.0.0.1")
}
