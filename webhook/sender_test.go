package webhook

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald"
	"github.com/stretchr/testify/require"
)

// received is what a test server saw of one request.
type received struct {
	method string
	host   string
	header http.Header
	body   []byte
}

type senderBundle struct {
	sender *Sender
	// requests receives every request the server handled.
	requests chan received
	server   *httptest.Server
}

// setupSender starts a loopback server running handler (after recording the
// request) and a Sender allowed to reach it.
func setupSender(t *testing.T, handler http.HandlerFunc) *senderBundle {
	t.Helper()
	b := &senderBundle{requests: make(chan received, 16)}
	b.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.requests <- received{method: r.Method, host: r.Host, header: r.Header.Clone(), body: body}
		if handler != nil {
			handler(w, r)
		}
	}))
	t.Cleanup(b.server.Close)
	b.sender = NewSender(Config{Guard: &Guard{AllowLoopback: true}})
	t.Cleanup(b.sender.Close)
	return b
}

func testRequest(url string) *Request {
	return &Request{
		URL:            url,
		Body:           []byte(`{"id":"evt_1","type":"bundle.indexed","data":{}}`),
		MsgID:          "dlv_123",
		Secrets:        []string{vectorSecret},
		Attempt:        3,
		EventType:      "bundle.indexed",
		SubscriptionID: "sub_9",
		Timeout:        5 * time.Second,
	}
}

// hang returns a handler that blocks until release is closed (or the client
// goes away), so a test can produce a timeout without sleeping. before runs
// first, e.g. to send a status line. The caller closes release in a cleanup
// registered after setupSender's, so it runs before the server's Close waits
// for handlers.
func hang(before func(w http.ResponseWriter)) (http.HandlerFunc, chan struct{}) {
	release := make(chan struct{})
	return func(w http.ResponseWriter, r *http.Request) {
		if before != nil {
			before(w)
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, release
}

func TestSendSuccess(t *testing.T) {
	t.Parallel()

	b := setupSender(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "thanks")
	})
	req := testRequest(b.server.URL + "/hook?token=abc")
	before := time.Now()
	res := b.sender.Send(context.Background(), req)

	require.True(t, res.Success, res.Message)
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Equal(t, herald.ErrorNone, res.Class)
	require.Empty(t, res.Message)
	require.Equal(t, "thanks", res.Excerpt)
	require.Positive(t, res.Duration)
	require.Zero(t, res.RetryAfter)

	got := <-b.requests
	require.Equal(t, http.MethodPost, got.method)
	require.Equal(t, req.Body, got.body)
	require.Equal(t, "application/json", got.header.Get("Content-Type"))
	require.Equal(t, DefaultUserAgent, got.header.Get("User-Agent"))
	require.Equal(t, "dlv_123", got.header.Get("webhook-id"))
	require.Equal(t, "3", got.header.Get("herald-attempt"))
	require.Equal(t, "bundle.indexed", got.header.Get("herald-event-type"))
	require.Equal(t, "sub_9", got.header.Get("herald-subscription-id"))
	require.Equal(t, strconv.Itoa(len(req.Body)), got.header.Get("Content-Length"))
	ts, err := strconv.ParseInt(got.header.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)
	require.InDelta(t, before.Unix(), ts, 1)
	require.NoError(t, Verify(req.Secrets, got.header, got.body, time.Now(), 0))
}

func TestSendSignatureRotationAndTimestamp(t *testing.T) {
	t.Parallel()

	b := setupSender(t, nil)
	req := testRequest(b.server.URL)
	second := NewSecret()
	req.Secrets = []string{vectorSecret, second}
	req.Timestamp = time.Unix(vectorTimestamp, 0)
	res := b.sender.Send(context.Background(), req)
	require.True(t, res.Success, res.Message)

	got := <-b.requests
	require.Equal(t, strconv.Itoa(vectorTimestamp), got.header.Get("webhook-timestamp"))
	require.Len(t, strings.Fields(got.header.Get("webhook-signature")), 2)
	now := time.Unix(vectorTimestamp, 0)
	require.NoError(t, Verify([]string{vectorSecret}, got.header, got.body, now, 0))
	require.NoError(t, Verify([]string{second}, got.header, got.body, now, 0))
}

func TestSendExtraHeaders(t *testing.T) {
	t.Parallel()

	b := setupSender(t, nil)
	req := testRequest(b.server.URL)
	req.Headers = map[string]string{
		"Authorization":          "Bearer xyz",
		"x-custom":               "yes",
		"User-Agent":             "custom-agent",
		"Content-Type":           "text/plain",
		"content-length":         "1",
		"Host":                   "evil.example",
		"Webhook-Id":             "forged",
		"webhook-signature":      "v1,forged",
		"WEBHOOK-TIMESTAMP":      "1",
		"Herald-Attempt":         "99",
		"herald-event-type":      "forged",
		"herald-subscription-id": "forged",
		"Herald-Anything":        "forged",
		"Connection":             "close",
		"Transfer-Encoding":      "chunked",
	}
	res := b.sender.Send(context.Background(), req)
	require.True(t, res.Success, res.Message)

	got := <-b.requests
	require.Equal(t, "Bearer xyz", got.header.Get("Authorization"))
	require.Equal(t, "yes", got.header.Get("X-Custom"))
	require.Equal(t, "custom-agent", got.header.Get("User-Agent"))
	require.Equal(t, "application/json", got.header.Get("Content-Type"))
	require.Equal(t, strings.TrimPrefix(b.server.URL, "http://"), got.host)
	require.Equal(t, "dlv_123", got.header.Get("Webhook-Id"))
	require.Equal(t, "3", got.header.Get("Herald-Attempt"))
	require.Equal(t, "bundle.indexed", got.header.Get("Herald-Event-Type"))
	require.Equal(t, "sub_9", got.header.Get("Herald-Subscription-Id"))
	require.Empty(t, got.header.Get("Herald-Anything"))
	require.Equal(t, req.Body, got.body)
	require.NoError(t, Verify(req.Secrets, got.header, got.body, time.Now(), 0))
}

func TestSendPut(t *testing.T) {
	t.Parallel()

	b := setupSender(t, nil)
	req := testRequest(b.server.URL)
	req.Method = "put"
	res := b.sender.Send(context.Background(), req)
	require.True(t, res.Success, res.Message)
	require.Equal(t, http.MethodPut, (<-b.requests).method)
}

func TestSendRedirectNotFollowed(t *testing.T) {
	t.Parallel()

	var followed atomic.Bool
	b := setupSender(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Store(true)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	res := b.sender.Send(context.Background(), testRequest(b.server.URL+"/hook"))
	require.False(t, res.Success)
	require.Equal(t, http.StatusFound, res.Status)
	require.Equal(t, herald.ErrorHTTPStatus, res.Class)
	require.Contains(t, res.Message, "302")
	require.False(t, followed.Load())
	require.Len(t, b.requests, 1)
}

func TestSendStatusClasses(t *testing.T) {
	t.Parallel()

	tests := []struct {
		status int
		class  herald.ErrorClass
	}{
		{http.StatusOK, herald.ErrorNone},
		{http.StatusNoContent, herald.ErrorNone},
		{http.StatusNotModified, herald.ErrorHTTPStatus},
		{http.StatusBadRequest, herald.ErrorHTTPStatus},
		{http.StatusNotFound, herald.ErrorHTTPStatus},
		{http.StatusGone, herald.ErrorGone},
		{http.StatusInternalServerError, herald.ErrorHTTPStatus},
		{599, herald.ErrorHTTPStatus},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
			})
			res := b.sender.Send(context.Background(), testRequest(b.server.URL))
			require.Equal(t, tt.class == herald.ErrorNone, res.Success)
			require.Equal(t, tt.status, res.Status)
			require.Equal(t, tt.class, res.Class)
			if !res.Success {
				require.Contains(t, res.Message, strconv.Itoa(tt.status))
			}
		})
	}
}

func TestSendRetryAfter(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		status int
		header func() string
		min    time.Duration
		max    time.Duration
	}{
		{"429 seconds", http.StatusTooManyRequests, func() string { return "120" }, 2 * time.Minute, 2 * time.Minute},
		{"503 seconds", http.StatusServiceUnavailable, func() string { return "7" }, 7 * time.Second, 7 * time.Second},
		{
			"429 date", http.StatusTooManyRequests,
			func() string { return time.Now().Add(time.Hour).UTC().Format(http.TimeFormat) },
			time.Hour - 5*time.Second, time.Hour,
		},
		{"429 clamped", http.StatusTooManyRequests, func() string { return "999999999" }, 24 * time.Hour, 24 * time.Hour},
		{"500 ignores it", http.StatusInternalServerError, func() string { return "120" }, 0, 0},
		{"429 without", http.StatusTooManyRequests, func() string { return "" }, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, func(w http.ResponseWriter, _ *http.Request) {
				if v := tt.header(); v != "" {
					w.Header().Set("Retry-After", v)
				}
				w.WriteHeader(tt.status)
			})
			res := b.sender.Send(context.Background(), testRequest(b.server.URL))
			require.False(t, res.Success)
			require.Equal(t, herald.ErrorHTTPStatus, res.Class)
			require.Equal(t, tt.status, res.Status)
			require.GreaterOrEqual(t, res.RetryAfter, tt.min)
			require.LessOrEqual(t, res.RetryAfter, tt.max)
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"30", 30 * time.Second},
		{" 30 ", 30 * time.Second},
		{"-5", 0},
		{"86400", 24 * time.Hour},
		{"86401", 24 * time.Hour},
		{"99999999999999999999", 0}, // overflows int64: unparseable
		{"1.5", 0},
		{"soon", 0},
		{"Sun, 01 Mar 2026 12:01:30 GMT", 90 * time.Second},
		{"Sunday, 01-Mar-26 12:01:30 GMT", 90 * time.Second}, // RFC 850
		{"Sun Mar  1 12:01:30 2026", 90 * time.Second},       // ANSI C
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0},                 // past
		{"Sun, 08 Mar 2026 12:00:00 GMT", 24 * time.Hour},    // a week: clamped
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, parseRetryAfter(tt.value, now))
		})
	}
}

func TestSendHugeBody(t *testing.T) {
	t.Parallel()

	const size = 8 << 20
	b := setupSender(t, func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("é", 512)) // 2-byte runes
		for written := 0; written < size; written += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // herald closed the connection after its read limit
			}
		}
	})
	res := b.sender.Send(context.Background(), testRequest(b.server.URL))
	require.True(t, res.Success, res.Message)
	require.LessOrEqual(t, len(res.Excerpt), herald.ResponseExcerptLimit)
	require.GreaterOrEqual(t, len(res.Excerpt), herald.ResponseExcerptLimit-3)
	require.True(t, utf8.ValidString(res.Excerpt))
	require.Equal(t, strings.Repeat("é", herald.ResponseExcerptLimit/2), res.Excerpt)
}

func TestExcerpt(t *testing.T) {
	t.Parallel()

	limit := herald.ResponseExcerptLimit
	tests := []struct {
		name      string
		in        string
		truncated bool
		want      string
	}{
		{"empty", "", false, ""},
		{"ascii", "ok", false, "ok"},
		{"utf8", "héllo ✓", false, "héllo ✓"},
		{"invalid byte", "a\xffb", false, "a\uFFFDb"},
		{"NUL", "a\x00b", false, "a\uFFFDb"},
		{"controls", "a\x1b[2J\x7f\tb\r\n", false, "a\uFFFD[2J\uFFFD\tb\r\n"},
		{"incomplete rune at end, complete body", "a\xe2\x9c", false, "a\uFFFD\uFFFD"},
		{"incomplete rune at end, truncated body", "a\xe2\x9c", true, "a"},
		{"at limit", strings.Repeat("x", limit), true, strings.Repeat("x", limit)},
		{"cut rune at limit", strings.Repeat("x", limit-1) + "\xc3", true, strings.Repeat("x", limit-1)},
		{"replacement would overflow", strings.Repeat("x", limit-1) + "\xff", false, strings.Repeat("x", limit-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := excerpt([]byte(tt.in), tt.truncated)
			require.Equal(t, tt.want, got)
			require.True(t, utf8.ValidString(got))
			require.LessOrEqual(t, len(got), limit)
		})
	}
}

func TestSendTimeout(t *testing.T) {
	t.Parallel()

	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		handler, release := hang(nil)
		b := setupSender(t, handler)
		t.Cleanup(func() { close(release) })
		req := testRequest(b.server.URL)
		req.Timeout = 100 * time.Millisecond
		res := b.sender.Send(context.Background(), req)
		require.False(t, res.Success)
		require.Equal(t, herald.ErrorTimeout, res.Class)
		require.Zero(t, res.Status)
		require.Contains(t, res.Message, "100ms")
		require.Less(t, res.Duration, 5*time.Second)
	})

	t.Run("2xx but body too slow", func(t *testing.T) {
		t.Parallel()
		handler, release := hang(func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
		})
		b := setupSender(t, handler)
		t.Cleanup(func() { close(release) })
		req := testRequest(b.server.URL)
		req.Timeout = 100 * time.Millisecond
		res := b.sender.Send(context.Background(), req)
		require.False(t, res.Success, "a 2xx whose body misses the timeout is not delivered")
		require.Equal(t, herald.ErrorTimeout, res.Class)
		require.Equal(t, http.StatusOK, res.Status)
		require.Equal(t, "partial", res.Excerpt)
	})

	t.Run("caller cancels", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		// The request has arrived; now the caller gives up.
		handler, release := hang(func(http.ResponseWriter) { cancel() })
		b := setupSender(t, handler)
		t.Cleanup(func() { close(release) })
		res := b.sender.Send(ctx, testRequest(b.server.URL))
		require.False(t, res.Success)
		require.Equal(t, herald.ErrorConnection, res.Class)
		require.Equal(t, "attempt cancelled", res.Message)
	})
}

func TestSendConnectionErrors(t *testing.T) {
	t.Parallel()

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())

		s := NewSender(Config{Guard: &Guard{AllowLoopback: true}})
		res := s.Send(context.Background(), testRequest("http://"+addr+"/hook"))
		require.False(t, res.Success)
		require.Equal(t, herald.ErrorConnection, res.Class)
		require.Equal(t, "connection refused", res.Message)
	})

	t.Run("closed without answer", func(t *testing.T) {
		t.Parallel()
		b := setupSender(t, func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		})
		res := b.sender.Send(context.Background(), testRequest(b.server.URL))
		require.False(t, res.Success)
		require.Equal(t, herald.ErrorConnection, res.Class)
		require.Zero(t, res.Status)
	})

	t.Run("tls", func(t *testing.T) {
		t.Parallel()
		// httptest's certificate is not trusted by the system roots.
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
		srv.StartTLS()
		t.Cleanup(srv.Close)
		s := NewSender(Config{Guard: &Guard{AllowLoopback: true}})
		res := s.Send(context.Background(), testRequest(srv.URL))
		require.False(t, res.Success)
		require.Equal(t, herald.ErrorTLS, res.Class, res.Message)
		require.True(t, strings.HasPrefix(res.Message, "tls: "), res.Message)
	})

	t.Run("plain HTTP server on https URL", func(t *testing.T) {
		t.Parallel()
		b := setupSender(t, nil)
		res := b.sender.Send(context.Background(), testRequest(strings.Replace(b.server.URL, "http:", "https:", 1)))
		require.Equal(t, herald.ErrorTLS, res.Class, res.Message)
	})

	t.Run("dns", func(t *testing.T) {
		t.Parallel()
		s := NewSender(Config{})
		// .invalid never resolves (RFC 6761).
		res := s.Send(context.Background(), testRequest("http://nonexistent.invalid/hook"))
		require.False(t, res.Success)
		require.Equal(t, herald.ErrorDNS, res.Class, res.Message)
		require.Contains(t, res.Message, "nonexistent.invalid")
	})
}

func TestSendDestinationForbidden(t *testing.T) {
	t.Parallel()

	b := setupSender(t, nil)
	for _, guard := range []*Guard{nil, {AllowPrivate: true}} {
		s := NewSender(Config{Guard: guard})
		for _, url := range []string{
			b.server.URL,
			strings.Replace(b.server.URL, "127.0.0.1", "localhost", 1), // resolved, then refused
		} {
			res := s.Send(context.Background(), testRequest(url))
			require.False(t, res.Success)
			require.Equal(t, herald.ErrorDestinationForbidden, res.Class, res.Message)
			require.Equal(t, "destination forbidden: loopback address", res.Message)
		}
	}
	require.Empty(t, b.requests, "nothing reached the server")

	res := NewSender(Config{Guard: &Guard{AllowLoopback: true}}).
		Send(context.Background(), testRequest("http://169.254.169.254/latest/meta-data/"))
	require.Equal(t, herald.ErrorDestinationForbidden, res.Class, res.Message)
}

func TestSendInvalidRequest(t *testing.T) {
	t.Parallel()

	b := setupSender(t, nil)
	tests := []struct {
		name   string
		modify func(r *Request)
	}{
		{"GET", func(r *Request) { r.Method = http.MethodGet }},
		{"bad method", func(r *Request) { r.Method = "PO ST" }},
		{"ftp scheme", func(r *Request) { r.URL = "ftp://example.com/x" }},
		{"relative URL", func(r *Request) { r.URL = "/hook" }},
		{"unparseable URL", func(r *Request) { r.URL = "http://exa mple.com/%zz?token=secret" }},
		{"no host", func(r *Request) { r.URL = "http:///hook" }},
		{"no secret", func(r *Request) { r.Secrets = nil }},
		{"bad secret", func(r *Request) { r.Secrets = []string{"whsec_!!!"} }},
		{"no message id", func(r *Request) { r.MsgID = "" }},
		{"header name", func(r *Request) { r.Headers = map[string]string{"X Bad": "v"} }},
		{"header value", func(r *Request) { r.Headers = map[string]string{"X-Bad": "a\r\nX-Injected: 1"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := testRequest(b.server.URL)
			tt.modify(req)
			res := b.sender.Send(context.Background(), req)
			require.False(t, res.Success)
			require.Equal(t, herald.ErrorInvalidRequest, res.Class)
			require.NotEmpty(t, res.Message)
			// Neither the URL's query nor a secret is echoed.
			require.NotContains(t, res.Message, "token")
			require.NotContains(t, res.Message, "!!!")
		})
	}
	require.Empty(t, b.requests)
}

func TestReservedHeader(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		reserved bool
	}{
		{"Content-Type", true},
		{"content-length", true},
		{"HOST", true},
		{"Webhook-Id", true},
		{"webhook-anything", true},
		{"Herald-Attempt", true},
		{"Connection", true},
		{"Transfer-Encoding", true},
		{"Proxy-Authorization", true},
		{"Expect", true},
		{"Authorization", false},
		{"User-Agent", false},
		{"X-Webhook-Id", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.reserved, ReservedHeader(tt.name))
		})
	}
}
