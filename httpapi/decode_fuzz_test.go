package httpapi

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// requireClientError checks that a decoder failure is a client error: a
// *herald.Error with a code that maps to a 4xx status.
func requireClientError(t *testing.T, err error) {
	t.Helper()
	var he *herald.Error
	require.True(t, errors.As(err, &he), "not a *herald.Error: %T %v", err, err)
	status, ok := codeStatus[he.Code]
	require.True(t, ok, "code %q not in the table", he.Code)
	require.True(t, status >= 400 && status < 500, "code %q is %d", he.Code, status)
	require.NotEmpty(t, he.Message)
}

func FuzzDecodeEvent(f *testing.F) {
	for _, seed := range []string{
		`{"type": "bundle.indexed"}`,
		`{"id": "x-1", "type": "a.b", "key": "k", "version": 7, "data": {"any": ["json", 1.5, null]}}`,
		`{"type": "a", "version": -9223372036854775808}`,
		`{"type": "a", "version": 9223372036854775808}`,
		`{"type": "a", "version": 1e3}`,
		`{"type": "herald.x"}`,
		`{"type": "a b"}`,
		`{"type": "a", "data": }`,
		`{"type": "a"} {}`,
		`[]`, `null`, ``, `"x"`, `{"type": "\u0000"}`, `{"type": "a", "id": "\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := decodeEvent(body)
		if err != nil {
			require.Nil(t, ev)
			requireClientError(t, err)
			return
		}
		require.True(t, json.Valid(body))
		require.NotEmpty(t, ev.Type)
		require.LessOrEqual(t, utf8.RuneCountInString(ev.Type), maxEventType)
		require.False(t, herald.IsSystemEventType(ev.Type))
		require.True(t, json.Valid(ev.Data), "data %q", ev.Data)
	})
}

func FuzzDecodeSubscription(f *testing.F) {
	for _, seed := range []string{
		`{"url": "https://example.com/hook"}`,
		`{"url": "http://h:1/p?q", "method": "PUT", "event_types": ["bundle.*"], "filter": {"cel": "data.size > 10"},
		  "headers": {"x-tenant": "a"}, "ordering": "fifo", "key_interval_ms": 0, "rate_limit": {"max": 10, "per_seconds": 1},
		  "max_in_flight": 0, "timeout_ms": 10000, "description": "d", "metadata": {"a": [1]}, "state": "enabled"}`,
		`{"url": "https://e.com", "filter": {"jmespath": "data.size > ` + "`10`" + `"}}`,
		`{"url": "https://e.com", "filter": {"es_query": {"query": {"term": {"type": "a"}}}}}`,
		`{"url": "https://e.com", "filter": {"cel": "(", "jmespath": "a"}}`,
		`{"url": "https://e.com", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`,
		`{"url": "https://e.com", "headers": {"Host": "x", "a\r\n": "b"}}`,
		`{"url": "https://e.com", "rate_limit": {"max": 1}}`,
		`{"url": "javascript:alert(1)"}`, `{"url": "http://[::1"}`, `{"url": 1}`,
		`[]`, `null`, ``, `{`, `{"url": "https://e.com",}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeSubscription(body)
		if err != nil {
			require.Nil(t, in)
			requireClientError(t, err)
			return
		}
		s := in.sub
		require.NotEmpty(t, s.URL)
		require.Contains(t, []string{"POST", "PUT"}, s.Method)
		require.True(t, s.Ordering.Valid())
		require.True(t, s.TimeoutMS >= 1 && s.TimeoutMS <= maxTimeoutMS)
		require.True(t, json.Valid(s.Metadata))
		for name, value := range s.Headers {
			require.NoError(t, validHeader(name, value))
		}
		// An empty PATCH of what was stored validates again, to the same
		// subscription: reading back never yields an unpatchable one.
		s.State = herald.SubscriptionEnabled
		merged, err := mergeSubscription(&s, []byte(`{}`))
		require.NoError(t, err)
		again, err := decodeSubscription(merged)
		require.NoError(t, err, "%s", merged)
		require.Equal(t, s.URL, again.sub.URL)
		require.Equal(t, s.Filter, again.sub.Filter)
		require.Equal(t, s.RateLimit, again.sub.RateLimit)
	})
}
