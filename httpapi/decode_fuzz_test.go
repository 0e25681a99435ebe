package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/webhook"
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
		`{"type": "a", "key": "k\u0000ey"}`, `{"type": "a", "key": "\u001b[2J"}`, `{"type": "a", "key": "\u0085"}`,
		"{\"type\": \"a\", \"key\": \"caf\xe9\"}", "{\"type\": \"a\", \"data\": {\"s\": \"caf\xe9\"}}",
		"{\"type\": \"a\", \"data\": [\"\x80\", \"\xed\xa0\x80\"]}", "{\"type\": \"a\xff\"}",
		`{"type": "a", "data": {"s": "\u0000 inside data is kept"}}`,
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
		// Everything kept is storable text: valid UTF-8, no NUL, and no
		// control characters in the key.
		require.True(t, utf8.Valid(ev.Data), "data %q", ev.Data)
		for _, s := range []string{ev.ID, ev.Type, ev.Key} {
			require.True(t, utf8.ValidString(s), "%q", s)
			require.NotContains(t, s, "\x00")
		}
		require.Equal(t, -1, strings.IndexFunc(ev.Key, unicode.IsControl), "key %q", ev.Key)
	})
}

func FuzzDecodeBatch(f *testing.F) {
	for _, seed := range []string{
		`{"events": [{"type": "a"}, {"type": "b", "key": "k"}]}`,
		`{"events": [{"type": "a", "key": "k\u0000"}, {"type": "b"}]}`,
		"{\"events\": [{\"type\": \"a\", \"data\": \"caf\xe9\"}, {\"type\": \"b\"}]}",
		"{\"events\": [{\"type\": \"a\", \"id\": \"\xff\"}, 7, null, \"\xff\"]}",
		`{"events": []}`, `{"events": {}}`, `{}`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		events, index, results, err := decodeBatch(body)
		if err != nil {
			require.Nil(t, events)
			requireClientError(t, err)
			return
		}
		require.Len(t, events, len(index))
		rejected := 0
		for i, r := range results {
			require.Equal(t, i, r.Index)
			if r.Status == batchRejected {
				rejected++
				require.NotNil(t, r.Error)
				require.True(t, strings.HasPrefix(r.Error.Field, fmt.Sprintf("events[%d]", i)), "%+v", r.Error)
			}
		}
		require.Equal(t, len(results), rejected+len(events), "every item is either decoded or rejected")
		for _, ev := range events {
			require.True(t, utf8.Valid(ev.Data), "data %q", ev.Data)
			require.True(t, utf8.ValidString(ev.Key) && !strings.ContainsRune(ev.Key, 0))
		}
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
		`{"url": "https://e.com", "description": "a\u0000b"}`, `{"url": "https://e.com", "description": "\u001b[31m"}`,
		`{"url": "https://e.com", "description": "line\n\tnext"}`,
		"{\"url\": \"https://e.com\", \"description\": \"caf\xe9\"}",
		"{\"url\": \"https://e.com\", \"metadata\": {\"a\": \"\xff\"}}",
		`{"url": "https://e.com", "filter": {"cel": "data.a == '\u0000'"}}`,
		`{"url": "https://e.com", "event_types": ["a\u0000"]}`,
		`{"url": "https://e.com", "headers": {"Expect": "100-continue", "Proxy-Authorization": "x"}}`,
		`{"destination": {"type": "amqp", "connection": "rabbit", "exchange": "events", "routing_key": "a.b"}}`,
		`{"destination": {"type": "nats", "connection": "n", "subject": "a.*"}}`,
		`{"destination": {"type": "redis", "connection": "r", "stream": "s", "maxlen": 10}}`,
		`{"destination": {"type": "mqtt", "connection": "m", "topic": "a/b", "retain": true}}`,
		`{"url": "https://e.com", "destination": {"type": "webhook", "url": "https://e.com", "method": "put"}}`,
		`{"destination": {"type": "webpush", "subscription": {"endpoint": "https://p.example/x", "keys": {"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", "auth": "tBHItJI5svbpez7KI4CCXg"}}}}`,
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
		require.True(t, s.Destination.Type.Valid())
		if s.Destination.Type == herald.DestinationWebhook {
			require.NotEmpty(t, s.URL)
			require.Contains(t, []string{"POST", "PUT"}, s.Method)
			require.Equal(t, s.URL, s.Destination.URL)
		} else {
			require.Empty(t, s.URL)
		}
		require.True(t, s.Ordering.Valid())
		require.True(t, s.TimeoutMS >= 1 && s.TimeoutMS <= maxTimeoutMS)
		require.True(t, json.Valid(s.Metadata))
		require.True(t, utf8.Valid(s.Metadata), "metadata %q", s.Metadata)
		texts := append([]string{s.URL, s.Description}, s.EventTypes...)
		if s.Filter != nil {
			texts = append(texts, s.Filter.CEL, s.Filter.JMESPath)
			require.True(t, utf8.Valid(s.Filter.ESQuery))
		}
		for _, v := range texts {
			require.True(t, utf8.ValidString(v), "%q", v)
			require.NotContains(t, v, "\x00")
		}
		for name := range s.Headers {
			require.False(t, webhook.ReservedHeader(name), "reserved header %q accepted", name)
		}
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
		require.Equal(t, s.Destination, again.sub.Destination)
		require.Equal(t, s.Filter, again.sub.Filter)
		require.Equal(t, s.RateLimit, again.sub.RateLimit)
	})
}

// FuzzCompactJSON: for any valid JSON, compactJSON's fast path returns
// exactly what json.Compact would.
func FuzzCompactJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, `{"a": 1}`, "[1,\n2]", `"a b"`, `"a\" b"`, `"\\"`, `"\\" `, `{"k":"v\\\"","w":[ ]}`,
		`{"s":"tab\there"}`, "\t{}", `null`, `"\u0020"`, `{"a":"\\\\"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if !json.Valid(src) {
			return
		}
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, src))
		got, err := compactJSON(src)
		require.NoError(t, err)
		require.Equal(t, want.String(), string(got))
	})
}

// FuzzSplitJSON: for any valid JSON, splitObject and splitArray give
// exactly the fields and elements json.Unmarshal gives.
func FuzzSplitJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, ` { "a" : 1 , "b":[1, {"c":"}"}] } `, `{"a":1,"a":2}`, `{"\u0074ype":"x"}`, "{\"caf\xe9\":1}",
		`["a\"]", {"k":[]}, null, true, -1.5e3]`, `"s"`, `12`, `null`, `{"a":"\\"}`, `[[[]]]`, `{"":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		first := bytes.TrimLeft(b, " \t\r\n")
		fields, okObj := splitObject(b)
		items, okArr := splitArray(b)
		switch first[0] {
		case '{':
			var want map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(b, &want))
			require.True(t, okObj)
			require.Len(t, fields, len(want))
			for k, v := range want {
				require.Contains(t, fields, k)
				require.Equal(t, string(v), string(fields[k]), "field %q", k)
			}
			require.False(t, okArr)
		case '[':
			var want []json.RawMessage
			require.NoError(t, json.Unmarshal(b, &want))
			require.True(t, okArr)
			require.Len(t, items, len(want))
			for i := range want {
				require.Equal(t, string(want[i]), string(items[i]), "item %d", i)
			}
			require.False(t, okObj)
		default:
			require.False(t, okObj)
			require.False(t, okArr)
		}
	})
}
