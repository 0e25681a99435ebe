package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// TestBadInput checks each refused input's exact status, code and field.
func TestBadInput(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{})
		subPath := "/v1/subscriptions/" + sub.ID

		_, celErr := filter.Compile(&herald.Filter{CEL: "data.size >"})
		require.Error(t, celErr)
		var wantCEL *herald.Error
		require.ErrorAs(t, celErr, &wantCEL)

		type tc struct {
			name         string
			method, path string
			body         any
			status       int
			code         herald.Code
			field        string
		}
		sublike := func(name string, body any, status int, code herald.Code, field string) tc {
			return tc{name, http.MethodPost, "/v1/subscriptions", body, status, code, field}
		}
		evlike := func(name string, body any, status int, code herald.Code, field string) tc {
			return tc{name, http.MethodPost, "/v1/events", body, status, code, field}
		}
		const bad = http.StatusBadRequest
		cases := []tc{
			sublike("malformed JSON", `{"url": "https://a.example",}`, bad, herald.CodeInvalidJSON, ""),
			sublike("empty body", ``, bad, herald.CodeInvalidJSON, ""),
			sublike("not an object", `["https://a.example"]`, bad, herald.CodeInvalidJSON, ""),
			sublike("null body", `null`, bad, herald.CodeInvalidJSON, ""),
			sublike("trailing garbage", `{"url": "https://a.example"} {}`, bad, herald.CodeInvalidJSON, ""),
			sublike("unknown field", obj{"url": "https://a.example", "retries": 3}, bad, herald.CodeUnknownField, "retries"),
			sublike("unknown nested field", obj{"url": "https://a.example", "rate_limit": obj{"max": 1, "per_seconds": 1, "burst": 2}}, bad, herald.CodeUnknownField, "rate_limit.burst"),
			sublike("missing url", obj{"method": "POST"}, bad, herald.CodeMissingField, "url"),
			sublike("url not a string", obj{"url": 42}, bad, herald.CodeInvalidField, "url"),
			sublike("url scheme", obj{"url": "ftp://a.example/x"}, bad, herald.CodeInvalidField, "url"),
			sublike("url relative", obj{"url": "/hook"}, bad, herald.CodeInvalidField, "url"),
			sublike("url no host", obj{"url": "https:///hook"}, bad, herald.CodeInvalidField, "url"),
			sublike("url garbage", obj{"url": "http://a b.example/"}, bad, herald.CodeInvalidField, "url"),
			sublike("url too long", obj{"url": "https://a.example/" + strings.Repeat("x", 2048)}, bad, herald.CodeInvalidField, "url"),
			sublike("bad method", obj{"url": "https://a.example", "method": "GET"}, bad, herald.CodeInvalidField, "method"),
			sublike("bad event type pattern", obj{"url": "https://a.example", "event_types": []string{"a.*", "b[.*"}}, bad, herald.CodeInvalidField, "event_types[1]"),
			sublike("event type not a string", obj{"url": "https://a.example", "event_types": []any{"a", 1}}, bad, herald.CodeInvalidField, "event_types[1]"),
			sublike("too many event types", obj{"url": "https://a.example", "event_types": make([]string, 101)}, bad, herald.CodeInvalidField, "event_types"),
			sublike("bad filter", obj{"url": "https://a.example", "filter": obj{"cel": "data.size >"}}, http.StatusUnprocessableEntity, herald.CodeInvalidFilter, wantCEL.Field),
			sublike("two filter kinds", obj{"url": "https://a.example", "filter": obj{"cel": "true", "jmespath": "a"}}, http.StatusUnprocessableEntity, herald.CodeInvalidFilter, "filter"),
			sublike("unknown filter kind", obj{"url": "https://a.example", "filter": obj{"lua": "x"}}, bad, herald.CodeUnknownField, "filter.lua"),
			sublike("bad secret", obj{"url": "https://a.example", "secret": "hunter2"}, bad, herald.CodeInvalidField, "secret"),
			sublike("short secret", obj{"url": "https://a.example", "secret": "whsec_c2hvcnQ="}, bad, herald.CodeInvalidField, "secret"),
			sublike("reserved header", obj{"url": "https://a.example", "headers": obj{"Webhook-Signature": "x"}}, bad, herald.CodeInvalidField, "headers.Webhook-Signature"),
			sublike("reserved header content-type", obj{"url": "https://a.example", "headers": obj{"content-type": "text/plain"}}, bad, herald.CodeInvalidField, "headers.content-type"),
			sublike("reserved header herald-", obj{"url": "https://a.example", "headers": obj{"herald-attempt": "9"}}, bad, herald.CodeInvalidField, "headers.herald-attempt"),
			sublike("header CRLF", obj{"url": "https://a.example", "headers": obj{"x-a": "1\r\nx-b: 2"}}, bad, herald.CodeInvalidField, "headers.x-a"),
			sublike("header bad name", obj{"url": "https://a.example", "headers": obj{"x a": "1"}}, bad, herald.CodeInvalidField, "headers.x a"),
			sublike("header value not a string", obj{"url": "https://a.example", "headers": obj{"x-a": 1}}, bad, herald.CodeInvalidField, "headers.x-a"),
			sublike("bad ordering", obj{"url": "https://a.example", "ordering": "lifo"}, bad, herald.CodeInvalidField, "ordering"),
			sublike("negative key interval", obj{"url": "https://a.example", "key_interval_ms": -1}, bad, herald.CodeInvalidField, "key_interval_ms"),
			sublike("rate limit zero", obj{"url": "https://a.example", "rate_limit": obj{"max": 0, "per_seconds": 1}}, bad, herald.CodeInvalidField, "rate_limit.max"),
			sublike("rate limit missing per", obj{"url": "https://a.example", "rate_limit": obj{"max": 1}}, bad, herald.CodeMissingField, "rate_limit.per_seconds"),
			sublike("rate limit not an object", obj{"url": "https://a.example", "rate_limit": 5}, bad, herald.CodeInvalidField, "rate_limit"),
			sublike("negative max in flight", obj{"url": "https://a.example", "max_in_flight": -1}, bad, herald.CodeInvalidField, "max_in_flight"),
			sublike("timeout zero", obj{"url": "https://a.example", "timeout_ms": 0}, bad, herald.CodeInvalidField, "timeout_ms"),
			sublike("timeout too long", obj{"url": "https://a.example", "timeout_ms": 300001}, bad, herald.CodeInvalidField, "timeout_ms"),
			sublike("timeout float", obj{"url": "https://a.example", "timeout_ms": 1000.5}, bad, herald.CodeInvalidField, "timeout_ms"),
			sublike("timeout string", obj{"url": "https://a.example", "timeout_ms": "1000"}, bad, herald.CodeInvalidField, "timeout_ms"),
			sublike("timeout overflow", `{"url": "https://a.example", "timeout_ms": 99999999999999999999}`, bad, herald.CodeInvalidField, "timeout_ms"),
			sublike("description too long", obj{"url": "https://a.example", "description": strings.Repeat("é", 1025)}, bad, herald.CodeInvalidField, "description"),
			sublike("metadata not an object", obj{"url": "https://a.example", "metadata": []int{1}}, bad, herald.CodeInvalidField, "metadata"),
			sublike("bad state", obj{"url": "https://a.example", "state": "paused"}, bad, herald.CodeInvalidField, "state"),

			evlike("event malformed", `{"type": "a"`, bad, herald.CodeInvalidJSON, ""),
			evlike("event trailing garbage", `{"type": "a"} x`, bad, herald.CodeInvalidJSON, ""),
			evlike("event unknown field", obj{"type": "a", "payload": 1}, bad, herald.CodeUnknownField, "payload"),
			evlike("event missing type", obj{"data": 1}, bad, herald.CodeMissingField, "type"),
			evlike("event empty type", obj{"type": ""}, bad, herald.CodeMissingField, "type"),
			evlike("event type whitespace", obj{"type": "a b"}, bad, herald.CodeInvalidField, "type"),
			evlike("event type too long", obj{"type": strings.Repeat("a", 257)}, bad, herald.CodeInvalidField, "type"),
			evlike("event type reserved", obj{"type": "herald.delivery.dead"}, bad, herald.CodeInvalidField, "type"),
			evlike("event id empty", obj{"type": "a", "id": ""}, bad, herald.CodeInvalidField, "id"),
			evlike("event id control char", obj{"type": "a", "id": "a\x00b"}, bad, herald.CodeInvalidField, "id"),
			evlike("event id not a string", obj{"type": "a", "id": 7}, bad, herald.CodeInvalidField, "id"),
			evlike("event key too long", obj{"type": "a", "key": strings.Repeat("k", 257)}, bad, herald.CodeInvalidField, "key"),
			evlike("event version float", obj{"type": "a", "version": 1.5}, bad, herald.CodeInvalidField, "version"),
			evlike("event version exponent", `{"type": "a", "version": 1e3}`, bad, herald.CodeInvalidField, "version"),
			evlike("event version string", obj{"type": "a", "version": "7"}, bad, herald.CodeInvalidField, "version"),

			{"patch malformed", http.MethodPatch, subPath, `{`, bad, herald.CodeInvalidJSON, ""},
			{"patch bad header", http.MethodPatch, subPath, obj{"headers": obj{"host": "x"}}, bad, herald.CodeInvalidField, "headers.host"},
			{"patch bad filter", http.MethodPatch, subPath, obj{"filter": obj{"cel": "data.size >"}}, http.StatusUnprocessableEntity, herald.CodeInvalidFilter, wantCEL.Field},

			{"unknown subscription", http.MethodGet, "/v1/subscriptions/sub_nope", nil, http.StatusNotFound, herald.CodeNotFound, ""},
			{"unknown event", http.MethodGet, "/v1/events/nope", nil, http.StatusNotFound, herald.CodeNotFound, ""},
			{"unknown delivery", http.MethodGet, "/v1/deliveries/dlv_nope", nil, http.StatusNotFound, herald.CodeNotFound, ""},
			{"bad cursor", http.MethodGet, "/v1/subscriptions?cursor=not-a-cursor!", nil, bad, herald.CodeInvalidCursor, "cursor"},
			{"cursor of another kind", http.MethodGet, "/v1/subscriptions?cursor=" + encodeCursor("dlv_x"), nil, bad, herald.CodeInvalidCursor, "cursor"},
			{"limit zero", http.MethodGet, "/v1/subscriptions?limit=0", nil, bad, herald.CodeInvalidField, "limit"},
			{"limit too big", http.MethodGet, "/v1/deliveries?limit=1001", nil, bad, herald.CodeInvalidField, "limit"},
			{"limit not a number", http.MethodGet, "/v1/deliveries?limit=ten", nil, bad, herald.CodeInvalidField, "limit"},
			{"unknown route", http.MethodGet, "/v1/nope", nil, http.StatusNotFound, herald.CodeNotFound, ""},
			{"unknown nested route", http.MethodGet, "/v1/subscriptions/x/y/z", nil, http.StatusNotFound, herald.CodeNotFound, ""},
			{"wrong method", http.MethodPut, "/v1/events", obj{}, http.StatusMethodNotAllowed, codeMethodNotAllowed, ""},
			{"wrong method on id", http.MethodPost, subPath, obj{}, http.StatusMethodNotAllowed, codeMethodNotAllowed, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := requireError(t, b.do(t, c.method, c.path, c.body), c.status, c.code, c.field)
				if c.name == "bad filter" || c.name == "patch bad filter" {
					require.Equal(t, wantCEL.Message, e.Message, "the compiler's message is passed on")
				}
			})
		}

		// Nothing was created by any of that.
		list := ok[listJSON[obj]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil), http.StatusOK)
		require.Len(t, list.Data, 1)
		deliveries := ok[listJSON[obj]](t, b.do(t, http.MethodGet, "/v1/deliveries", nil), http.StatusOK)
		require.Empty(t, deliveries.Data)
	})
}

func TestBadInputDetails(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)

		// Malformed JSON names the position.
		e := requireError(t, b.do(t, http.MethodPost, "/v1/events", "{\n  \"type\": \"a\",\n  \"data\": [1, 2,, 3]\n}"),
			http.StatusBadRequest, herald.CodeInvalidJSON, "")
		require.Contains(t, e.Message, "line 3, column 17")

		// Unknown fields are named.
		e = requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://a.example", "secrett": "x"}),
			http.StatusBadRequest, herald.CodeUnknownField, "secrett")
		require.Contains(t, e.Message, "secrett")

		// Oversized bodies are refused before being read whole.
		big := `{"type": "a", "data": "` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}`
		requireError(t, b.do(t, http.MethodPost, "/v1/events", big), http.StatusRequestEntityTooLarge, herald.CodeBodyTooLarge, "")
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", big), http.StatusRequestEntityTooLarge, herald.CodeBodyTooLarge, "")
		// The batch route has its own, larger limit.
		res := ok[batchJSON](t, b.do(t, http.MethodPost, "/v1/events/batch", `{"events": [`+big+`]}`), http.StatusOK)
		require.Equal(t, "accepted", res.Results[0].Status)

		// 405 lists what is allowed.
		r := b.do(t, http.MethodDelete, "/v1/events", nil)
		require.Equal(t, http.StatusMethodNotAllowed, r.code)
		require.Equal(t, "GET, POST", r.header.Get("Allow"))

		// A secret is never echoed in an error.
		e = requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://a.example", "secret": "whsec_c2VjcmV0LXZhbHVl"}),
			http.StatusBadRequest, herald.CodeInvalidField, "secret")
		require.NotContains(t, e.Message, "c2VjcmV0LXZhbHVl")
	})
}

func TestAuth(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		require.NoError(t, s.APITokenCreate(t.Context(), &store.APITokenCreateParams{Hash: HashToken("stored-token"), Now: time.Now()}))

		for _, path := range []string{"/v1/subscriptions", "/v1/stats", "/v1/nope", "/v1/deliveries/dlv_x"} {
			r := b.do(t, http.MethodGet, path, nil, withoutToken())
			requireError(t, r, http.StatusUnauthorized, herald.CodeUnauthorized, "")
			require.Equal(t, `Bearer realm="herald"`, r.header.Get("WWW-Authenticate"))
			requireError(t, b.do(t, http.MethodGet, path, nil, withToken("wrong")), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		}
		requireError(t, b.do(t, http.MethodPost, "/v1/events", obj{"type": "a"}, withoutToken()), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/stats", nil, func(r *http.Request) { r.Header.Set("Authorization", "Basic dGVzdC10b2tlbg==") }),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/stats", nil, withToken("")), http.StatusUnauthorized, herald.CodeUnauthorized, "")

		// The static token and a stored one both work (twice: no cache
		// is involved either time).
		for range 2 {
			ok[statsJSON](t, b.do(t, http.MethodGet, "/v1/stats", nil, withToken(testToken)), http.StatusOK)
			ok[statsJSON](t, b.do(t, http.MethodGet, "/v1/stats", nil, withToken("stored-token")), http.StatusOK)
		}
		ok[statsJSON](t, b.do(t, http.MethodGet, "/v1/stats", nil, func(r *http.Request) { r.Header.Set("Authorization", "bearer "+testToken) }), http.StatusOK)

		// Health and metrics are open.
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, path, nil, withoutToken()).code, path)
		}
	})
}

func TestTokenAuthNoStatic(t *testing.T) {
	t.Parallel()
	a := NewTokenAuth(nil, "")
	p, err := a.Authenticate(t.Context(), "")
	require.NoError(t, err)
	require.Nil(t, p, "an empty token never matches an unset static token")
	require.Equal(t, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", HashToken("test"))
}

func TestStats(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{})
		e1 := b.publish(t, obj{"type": "a"})
		b.publish(t, obj{"type": "a"})
		b.killDeliveries(t, []string{b.deliveriesOf(t, e1.ID)[0].ID}, time.Now().UTC())

		raw := ok[obj](t, b.do(t, http.MethodGet, "/v1/stats", nil), http.StatusOK)
		for _, k := range []string{"tiers", "dead", "delivered_total"} {
			require.Contains(t, raw, k)
		}
		st := ok[statsJSON](t, b.do(t, http.MethodGet, "/v1/stats", nil), http.StatusOK)
		require.Len(t, st.Tiers, len(testTiers))
		var delays []string
		for i, tier := range st.Tiers {
			require.Equal(t, i, tier.Tier)
			delays = append(delays, tier.Delay)
		}
		require.Equal(t, []string{"0s", "5s", "1m", "24h"}, delays)
		require.Equal(t, int64(1), st.Tiers[0].Pending)
		require.Equal(t, int64(0), st.Tiers[0].InFlight)
		require.GreaterOrEqual(t, st.Tiers[0].OldestPendingAgeS, 0.0)
		require.Equal(t, int64(1), st.Dead)
		require.Equal(t, int64(0), st.DeliveredTotal)
	})
}

func TestFormatDelay(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 5 * time.Second: "5s", time.Minute: "1m", 10 * time.Minute: "10m", time.Hour: "1h",
		90 * time.Minute: "1h30m", 24 * time.Hour: "24h", 100 * time.Millisecond: "100ms",
		1500 * time.Millisecond: "1.5s", time.Minute + time.Second: "1m1s", time.Hour + time.Second: "1h0m1s",
	} {
		require.Equal(t, want, herald.FormatDelay(d))
		back, err := time.ParseDuration(want)
		require.NoError(t, err)
		require.Equal(t, d, back)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		require.JSONEq(t, `{"status":"ok"}`, string(b.do(t, http.MethodGet, "/healthz", nil).body))
		require.JSONEq(t, `{"status":"ok"}`, string(b.do(t, http.MethodGet, "/readyz", nil).body))
		require.Equal(t, "herald_up 1\n", string(b.do(t, http.MethodGet, "/metrics", nil).body))

		require.NoError(t, s.Close())
		requireError(t, b.do(t, http.MethodGet, "/readyz", nil), http.StatusServiceUnavailable, herald.CodeStoreUnavailable, "")
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", nil).code, "liveness does not depend on the store")
		// API calls answer 503 with a generic message (the static token
		// needs no store).
		e := requireError(t, b.do(t, http.MethodGet, "/v1/subscriptions", nil), http.StatusServiceUnavailable, herald.CodeStoreUnavailable, "")
		require.Equal(t, msgStoreUnavailable, e.Message)
	})
}

func TestNewRequiresDependencies(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { New(Config{}) })
}

func TestExtraRoutes(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	h := New(Config{
		Store: s, Publisher: ingest.New(ingest.Config{Store: s}), Auth: NewTokenAuth(s, testToken),
		Extra: map[string]http.Handler{
			"POST /wpush/v1/{token}": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, r.PathValue("token"))
			}),
		},
	})
	b := &testBundle{store: s, handler: h}
	r := b.do(t, http.MethodPost, "/wpush/v1/abc", "x", withoutToken(), notDocumented())
	require.Equal(t, http.StatusCreated, r.code)
	require.Equal(t, "abc", string(r.body))
	requireError(t, b.do(t, http.MethodGet, "/wpush/v1/abc", nil, withoutToken()), http.StatusMethodNotAllowed, codeMethodNotAllowed, "")
	requireError(t, b.do(t, http.MethodGet, "/nowhere", nil, withoutToken()), http.StatusNotFound, herald.CodeNotFound, "")
	// herald serve always mounts /metrics, so the document has no 404 for it.
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/metrics", nil, notDocumented()).code, "no Metrics handler, no route")
}

// failingPublisher fails every publish with err.
type failingPublisher struct{ err error }

func (p failingPublisher) PublishOne(context.Context, *herald.Event) (store.EventInsertResult, error) {
	return store.EventInsertResult{}, p.err
}

func (p failingPublisher) PublishMany(context.Context, []*herald.Event) ([]store.EventInsertResult, error) {
	return nil, p.err
}

func TestUnexpectedErrors(t *testing.T) {
	t.Parallel()
	setupFailing := func(t *testing.T, err error) (*testBundle, *bytes.Buffer) {
		s := testdb.SQLite(t)
		logs := &bytes.Buffer{}
		h := New(Config{
			Store: s, Publisher: failingPublisher{err}, Auth: NewTokenAuth(s, testToken),
			Logger: slog.New(slog.NewTextHandler(logs, nil)),
		})
		return &testBundle{store: s, handler: h}, logs
	}

	t.Run("internal", func(t *testing.T) {
		t.Parallel()
		b, logs := setupFailing(t, fmt.Errorf("error storing events: %w", errors.New("disk on fire at /dev/sda")))
		for _, r := range []response{
			b.do(t, http.MethodPost, "/v1/events", obj{"type": "a"}),
			b.do(t, http.MethodPost, "/v1/events/batch", obj{"events": []obj{{"type": "a"}}}),
		} {
			e := requireError(t, r, http.StatusInternalServerError, herald.CodeInternal, "")
			require.Equal(t, msgInternal, e.Message, "the cause is not shown")
		}
		require.Equal(t, 2, strings.Count(logs.String(), "disk on fire"), "logged once per request:\n%s", logs)
	})

	t.Run("store unavailable", func(t *testing.T) {
		t.Parallel()
		b, logs := setupFailing(t, fmt.Errorf("error storing events: %w", herald.ErrStoreUnavailable))
		requireError(t, b.do(t, http.MethodPost, "/v1/events", obj{"type": "a"}), http.StatusServiceUnavailable, herald.CodeStoreUnavailable, "")
		require.Equal(t, 1, strings.Count(logs.String(), "\n"), "one log line:\n%s", logs)
		require.Contains(t, logs.String(), "level=WARN")
	})

	t.Run("client errors are not logged", func(t *testing.T) {
		t.Parallel()
		b, logs := setupFailing(t, errors.New("unused"))
		requireError(t, b.do(t, http.MethodPost, "/v1/events", obj{"type": 1}), http.StatusBadRequest, herald.CodeInvalidField, "type")
		requireError(t, b.do(t, http.MethodPost, "/v1/events", obj{"type": "a"}, withoutToken()), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		require.Empty(t, logs.String())
	})
}
