package httpapi

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// pushKeys returns a valid keys.p256dh and keys.auth.
func pushKeys(t *testing.T) (p256dh, auth string) {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	a := make([]byte, 16)
	_, _ = rand.Read(a)
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(a)
}

func webPushDest(t *testing.T, endpoint string) obj {
	p256dh, auth := pushKeys(t)
	return obj{"type": "webpush", "subscription": obj{"endpoint": endpoint, "expirationTime": nil,
		"keys": obj{"p256dh": p256dh, "auth": auth}}}
}

// createConnections creates one connection per broker type, named after
// it ("amqp", …), granted to tenants.
func (b *testBundle) createConnections(t *testing.T, tenants any) {
	t.Helper()
	for typ, url := range map[string]string{"amqp": "amqp://guest:guest@127.0.0.1:5672/", "nats": "nats://127.0.0.1:4222",
		"redis": "redis://127.0.0.1:6379/0", "mqtt": "mqtt://127.0.0.1:1883"} {
		ok[connectionJSON](t, b.do(t, http.MethodPost, "/v1/connections",
			obj{"name": typ, "type": typ, "url": url, "tenants": tenants}), http.StatusCreated)
	}
}

// TestSubscriptionDestinations: every type is created, read back with its
// full destination (defaults shown), listed, and patched between types.
func TestSubscriptionDestinations(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createConnections(t, []string{})

		// url alone is a webhook, shown with its destination.
		hook := b.createSub(t, obj{"url": "https://example.com/a"})
		require.Equal(t, "https://example.com/a", hook.URL)
		require.Equal(t, destinationJSON{Type: "webhook", URL: refOf("https://example.com/a"), Method: refOf("POST")}, hook.Destination)
		// url and destination together must agree.
		same := b.createSub(t, obj{"url": "https://example.com/a", "method": "put",
			"destination": obj{"type": "webhook", "url": "https://example.com/a", "method": "PUT"}})
		require.Equal(t, "PUT", *same.Destination.Method)
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://example.com/a",
			"destination": obj{"type": "webhook", "url": "https://example.com/b"}}), http.StatusBadRequest, herald.CodeInvalidField, "url")
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"method": "POST",
			"destination": obj{"type": "webhook", "url": "https://example.com/b", "method": "PUT"}}), http.StatusBadRequest, herald.CodeInvalidField, "method")
		onlyDest := ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions",
			obj{"destination": obj{"type": "webhook", "url": "https://example.com/c"}}), http.StatusCreated)
		require.Equal(t, "https://example.com/c", onlyDest.URL)
		require.Equal(t, "POST", onlyDest.Method)

		push := webPushDest(t, "https://push.example.com/send/abc")
		for _, tc := range []struct {
			dest obj
			want destinationJSON
		}{
			{push, destinationJSON{Type: "webpush", Urgency: refOf("normal"), TTLS: refOf(86400), Topic: refOf("")}},
			{obj{"type": "webpush", "subscription": push["subscription"], "urgency": "high", "ttl_s": 0, "topic": "k-1"},
				destinationJSON{Type: "webpush", Urgency: refOf("high"), TTLS: refOf(0), Topic: refOf("k-1")}},
			{obj{"type": "amqp", "connection": "amqp", "exchange": "events", "routing_key": "a.b"},
				destinationJSON{Type: "amqp", Connection: refOf("amqp"), Exchange: refOf("events"), RoutingKey: refOf("a.b")}},
			{obj{"type": "amqp", "connection": "amqp"},
				destinationJSON{Type: "amqp", Connection: refOf("amqp"), Exchange: refOf(""), RoutingKey: refOf("")}},
			{obj{"type": "nats", "connection": "nats", "subject": "herald.events"},
				destinationJSON{Type: "nats", Connection: refOf("nats"), Subject: refOf("herald.events")}},
			{obj{"type": "redis", "connection": "redis", "stream": "events", "maxlen": 100000},
				destinationJSON{Type: "redis", Connection: refOf("redis"), Stream: refOf("events"), MaxLen: refOf(int64(100000))}},
			{obj{"type": "mqtt", "connection": "mqtt", "topic": "herald/events", "retain": true},
				destinationJSON{Type: "mqtt", Connection: refOf("mqtt"), Topic: refOf("herald/events"), Retain: refOf(true)}},
			{obj{"type": "mqtt", "connection": "mqtt"},
				destinationJSON{Type: "mqtt", Connection: refOf("mqtt"), Topic: refOf(""), Retain: refOf(false)}},
		} {
			res := b.do(t, http.MethodPost, "/v1/subscriptions", obj{"destination": tc.dest})
			created := ok[subscriptionJSON](t, res, http.StatusCreated)
			require.NotContains(t, string(res.body), `"url":""`, "no top-level url for a %s destination", tc.want.Type)
			require.NotContains(t, string(res.body), `"method"`)
			if tc.want.Type == "webpush" {
				require.NotNil(t, created.Destination.Subscription)
				require.Equal(t, "https://push.example.com/send/abc", created.Destination.Subscription.Endpoint)
				created.Destination.Subscription = nil
			}
			require.Equal(t, tc.want, created.Destination)
			got := ok[subscriptionJSON](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+created.ID, nil), http.StatusOK)
			got.Destination.Subscription = nil
			require.Equal(t, tc.want, got.Destination)
			require.Empty(t, got.URL)
		}
		list := ok[listJSON[subscriptionJSON]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil), http.StatusOK)
		types := map[herald.DestinationType]int{}
		for _, sub := range list.Data {
			types[sub.Destination.Type]++
		}
		require.Equal(t, map[herald.DestinationType]int{"webhook": 3, "webpush": 2, "amqp": 2, "nats": 1, "redis": 1, "mqtt": 2}, types)

		// PATCH: webhook → amqp replaces the destination (url goes) …
		path := "/v1/subscriptions/" + hook.ID
		p := ok[subscriptionJSON](t, b.do(t, http.MethodPatch, path,
			obj{"destination": obj{"type": "amqp", "connection": "amqp", "exchange": "x"}}), http.StatusOK)
		require.Equal(t, destinationJSON{Type: "amqp", Connection: refOf("amqp"), Exchange: refOf("x"), RoutingKey: refOf("")}, p.Destination)
		require.Empty(t, p.URL)
		// … a destination of the same type (or none) is merged …
		p = ok[subscriptionJSON](t, b.do(t, http.MethodPatch, path, obj{"destination": obj{"routing_key": "r.k"}}), http.StatusOK)
		require.Equal(t, destinationJSON{Type: "amqp", Connection: refOf("amqp"), Exchange: refOf("x"), RoutingKey: refOf("r.k")}, p.Destination)
		p = ok[subscriptionJSON](t, b.do(t, http.MethodPatch, path, obj{"description": "unrelated"}), http.StatusOK)
		require.Equal(t, "r.k", *p.Destination.RoutingKey)
		// … a field of another type is refused, naming it …
		requireError(t, b.do(t, http.MethodPatch, path, obj{"destination": obj{"stream": "s"}}),
			http.StatusBadRequest, herald.CodeInvalidField, "destination.stream")
		// … and a url makes it a webhook again.
		p = ok[subscriptionJSON](t, b.do(t, http.MethodPatch, path, obj{"url": "https://example.com/back"}), http.StatusOK)
		require.Equal(t, destinationJSON{Type: "webhook", URL: refOf("https://example.com/back"), Method: refOf("POST")}, p.Destination)
		require.Equal(t, "https://example.com/back", p.URL)
		// webhook → webhook through destination.url.
		p = ok[subscriptionJSON](t, b.do(t, http.MethodPatch, path,
			obj{"destination": obj{"url": "https://example.com/d", "method": "PUT"}}), http.StatusOK)
		require.Equal(t, "https://example.com/d", p.URL)
		require.Equal(t, "PUT", p.Method)
		require.Equal(t, destinationJSON{Type: "webhook", URL: refOf("https://example.com/d"), Method: refOf("PUT")}, p.Destination)
		// A webhook patched to a url-less type needs no url removal.
		p = ok[subscriptionJSON](t, b.do(t, http.MethodPatch, path, obj{"destination": push}), http.StatusOK)
		require.Equal(t, herald.DestinationWebPush, p.Destination.Type)
	})
}

// TestDestinationValidation: every rule answers 400 with its code and
// the JSON path of the field at fault.
func TestDestinationValidation(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createConnections(t, "all")
		p256dh, auth := pushKeys(t)
		offCurve := make([]byte, 65)
		offCurve[0], offCurve[64] = 4, 1
		wp := func(endpoint, p256dh, auth string, extra obj) obj {
			d := obj{"type": "webpush", "subscription": obj{"endpoint": endpoint, "keys": obj{"p256dh": p256dh, "auth": auth}}}
			for k, v := range extra {
				d[k] = v
			}
			return d
		}
		const ep = "https://push.example.com/x"
		for _, tc := range []struct {
			name  string
			body  obj
			code  herald.Code
			field string
		}{
			{"unknown type", obj{"destination": obj{"type": "kafka"}}, herald.CodeInvalidField, "destination.type"},
			{"no type", obj{"destination": obj{"url": "https://e.com"}}, herald.CodeMissingField, "destination.type"},
			{"type not a string", obj{"destination": obj{"type": 1}}, herald.CodeInvalidField, "destination.type"},
			{"destination not an object", obj{"destination": "amqp"}, herald.CodeInvalidField, "destination"},
			{"unknown field", obj{"destination": obj{"type": "nats", "connection": "nats", "bogus": 1}}, herald.CodeUnknownField, "destination.bogus"},
			{"no url nor destination", obj{"description": "x"}, herald.CodeMissingField, "url"},
			{"webhook without url", obj{"destination": obj{"type": "webhook"}}, herald.CodeMissingField, "destination.url"},
			{"webhook bad url", obj{"destination": obj{"type": "webhook", "url": "ftp://e.com"}}, herald.CodeInvalidField, "destination.url"},
			{"webhook bad method", obj{"destination": obj{"type": "webhook", "url": "https://e.com", "method": "GET"}}, herald.CodeInvalidField, "destination.method"},
			{"webhook field of amqp", obj{"destination": obj{"type": "webhook", "url": "https://e.com", "exchange": "x"}}, herald.CodeInvalidField, "destination.exchange"},
			{"url beside amqp", obj{"url": "https://e.com", "destination": obj{"type": "amqp", "connection": "amqp"}}, herald.CodeInvalidField, "url"},
			{"method beside nats", obj{"method": "POST", "destination": obj{"type": "nats", "connection": "nats"}}, herald.CodeInvalidField, "method"},
			{"webpush url field", obj{"destination": obj{"type": "webpush", "url": "https://e.com"}}, herald.CodeInvalidField, "destination.url"},
			{"webpush no subscription", obj{"destination": obj{"type": "webpush"}}, herald.CodeMissingField, "destination.subscription"},
			{"webpush http endpoint", obj{"destination": wp("http://push.example.com/x", p256dh, auth, nil)}, herald.CodeInvalidField, "destination.subscription.endpoint"},
			{"webpush no endpoint", obj{"destination": wp("", p256dh, auth, nil)}, herald.CodeInvalidField, "destination.subscription.endpoint"},
			{"webpush p256dh not base64", obj{"destination": wp(ep, "***", auth, nil)}, herald.CodeInvalidField, "destination.subscription.keys.p256dh"},
			{"webpush p256dh short", obj{"destination": wp(ep, p256dh[:40], auth, nil)}, herald.CodeInvalidField, "destination.subscription.keys.p256dh"},
			{"webpush p256dh off curve", obj{"destination": wp(ep, base64.RawURLEncoding.EncodeToString(offCurve), auth, nil)}, herald.CodeInvalidField, "destination.subscription.keys.p256dh"},
			{"webpush p256dh missing", obj{"destination": wp(ep, "", auth, nil)}, herald.CodeMissingField, "destination.subscription.keys.p256dh"},
			{"webpush auth 8 bytes", obj{"destination": wp(ep, p256dh, "AAAAAAAAAAA", nil)}, herald.CodeInvalidField, "destination.subscription.keys.auth"},
			{"webpush auth missing", obj{"destination": wp(ep, p256dh, "", nil)}, herald.CodeMissingField, "destination.subscription.keys.auth"},
			{"webpush unknown key", obj{"destination": obj{"type": "webpush", "subscription": obj{"endpoint": ep, "keys": obj{"p256dh": p256dh, "auth": auth, "x": 1}}}}, herald.CodeUnknownField, "destination.subscription.keys.x"},
			{"webpush urgency", obj{"destination": wp(ep, p256dh, auth, obj{"urgency": "urgent"})}, herald.CodeInvalidField, "destination.urgency"},
			{"webpush ttl negative", obj{"destination": wp(ep, p256dh, auth, obj{"ttl_s": -1})}, herald.CodeInvalidField, "destination.ttl_s"},
			{"webpush ttl too long", obj{"destination": wp(ep, p256dh, auth, obj{"ttl_s": 2419201})}, herald.CodeInvalidField, "destination.ttl_s"},
			{"webpush ttl float", obj{"destination": wp(ep, p256dh, auth, obj{"ttl_s": 1.5})}, herald.CodeInvalidField, "destination.ttl_s"},
			{"webpush topic", obj{"destination": wp(ep, p256dh, auth, obj{"topic": "a b"})}, herald.CodeInvalidField, "destination.topic"},
			{"webpush connection field", obj{"destination": wp(ep, p256dh, auth, obj{"connection": "amqp"})}, herald.CodeInvalidField, "destination.connection"},
			{"amqp no connection", obj{"destination": obj{"type": "amqp"}}, herald.CodeMissingField, "destination.connection"},
			{"amqp bad connection name", obj{"destination": obj{"type": "amqp", "connection": "a/b"}}, herald.CodeInvalidField, "destination.connection"},
			{"amqp unknown connection", obj{"destination": obj{"type": "amqp", "connection": "ghost"}}, herald.CodeInvalidField, "destination.connection"},
			{"amqp connection of nats", obj{"destination": obj{"type": "amqp", "connection": "nats"}}, herald.CodeInvalidField, "destination.connection"},
			{"amqp exchange", obj{"destination": obj{"type": "amqp", "connection": "amqp", "exchange": "a b"}}, herald.CodeInvalidField, "destination.exchange"},
			{"amqp routing key long", obj{"destination": obj{"type": "amqp", "connection": "amqp", "routing_key": strings.Repeat("k", 256)}}, herald.CodeInvalidField, "destination.routing_key"},
			{"amqp subject field", obj{"destination": obj{"type": "amqp", "connection": "amqp", "subject": "a"}}, herald.CodeInvalidField, "destination.subject"},
			{"nats wildcard", obj{"destination": obj{"type": "nats", "connection": "nats", "subject": "a.*"}}, herald.CodeInvalidField, "destination.subject"},
			{"nats tail wildcard", obj{"destination": obj{"type": "nats", "connection": "nats", "subject": "a.>"}}, herald.CodeInvalidField, "destination.subject"},
			{"nats empty token", obj{"destination": obj{"type": "nats", "connection": "nats", "subject": "a..b"}}, herald.CodeInvalidField, "destination.subject"},
			{"nats space", obj{"destination": obj{"type": "nats", "connection": "nats", "subject": "a b"}}, herald.CodeInvalidField, "destination.subject"},
			{"nats topic field", obj{"destination": obj{"type": "nats", "connection": "nats", "topic": "a"}}, herald.CodeInvalidField, "destination.topic"},
			{"redis no stream", obj{"destination": obj{"type": "redis", "connection": "redis"}}, herald.CodeMissingField, "destination.stream"},
			{"redis empty stream", obj{"destination": obj{"type": "redis", "connection": "redis", "stream": ""}}, herald.CodeInvalidField, "destination.stream"},
			{"redis maxlen negative", obj{"destination": obj{"type": "redis", "connection": "redis", "stream": "s", "maxlen": -1}}, herald.CodeInvalidField, "destination.maxlen"},
			{"redis maxlen string", obj{"destination": obj{"type": "redis", "connection": "redis", "stream": "s", "maxlen": "10"}}, herald.CodeInvalidField, "destination.maxlen"},
			{"redis retain field", obj{"destination": obj{"type": "redis", "connection": "redis", "stream": "s", "retain": true}}, herald.CodeInvalidField, "destination.retain"},
			{"mqtt plus", obj{"destination": obj{"type": "mqtt", "connection": "mqtt", "topic": "a/+/b"}}, herald.CodeInvalidField, "destination.topic"},
			{"mqtt hash", obj{"destination": obj{"type": "mqtt", "connection": "mqtt", "topic": "a/#"}}, herald.CodeInvalidField, "destination.topic"},
			{"mqtt dollar", obj{"destination": obj{"type": "mqtt", "connection": "mqtt", "topic": "$SYS/x"}}, herald.CodeInvalidField, "destination.topic"},
			{"mqtt retain not bool", obj{"destination": obj{"type": "mqtt", "connection": "mqtt", "retain": "yes"}}, herald.CodeInvalidField, "destination.retain"},
			{"mqtt stream field", obj{"destination": obj{"type": "mqtt", "connection": "mqtt", "stream": "s"}}, herald.CodeInvalidField, "destination.stream"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", tc.body), http.StatusBadRequest, tc.code, tc.field)
			})
		}
		list := ok[listJSON[subscriptionJSON]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil), http.StatusOK)
		require.Empty(t, list.Data, "nothing refused was stored")
	})
}

// TestDestinationConnectionGrant: a tenant's subscription may use only a
// connection granted to its tenant (403 otherwise, and for one that does
// not exist, so a tenant cannot probe names); an untenanted one any.
func TestDestinationConnectionGrant(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		for name, tenants := range map[string]any{"for-globex": []string{"globex"}, "for-acme": []string{"acme", "x"}, "for-all": "all"} {
			ok[connectionJSON](t, b.do(t, http.MethodPost, "/v1/connections",
				obj{"name": name, "type": "redis", "url": "redis://:pw@127.0.0.1:6379", "tenants": tenants}), http.StatusCreated)
		}
		tok := b.createToken(t, obj{"name": "acme", "scopes": []string{"subscriptions:write", "subscriptions:read"}, "tenant": "acme"})
		dest := func(conn string) obj {
			return obj{"destination": obj{"type": "redis", "connection": conn, "stream": "s"}}
		}
		for _, conn := range []string{"for-globex", "ghost"} {
			e := requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", dest(conn), withToken(tok.Token)),
				http.StatusForbidden, herald.CodeForbidden, "")
			require.Contains(t, e.Message, conn)
		}
		for _, conn := range []string{"for-acme", "for-all"} {
			sub := ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions", dest(conn), withToken(tok.Token)), http.StatusCreated)
			require.Equal(t, "acme", sub.Tenant)
		}
		// An admin names the tenant explicitly: the same rule.
		body := dest("for-globex")
		body["tenant"] = "acme"
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", body), http.StatusForbidden, herald.CodeForbidden, "")
		// Untenanted: any connection.
		ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions", dest("for-globex")), http.StatusCreated)

		// PATCH onto a connection not granted: 403, nothing changed.
		sub := ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions", dest("for-acme"), withToken(tok.Token)), http.StatusCreated)
		requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+sub.ID, obj{"destination": obj{"connection": "for-globex"}},
			withToken(tok.Token)), http.StatusForbidden, herald.CodeForbidden, "")
		// A grant revoked later leaves the subscription editable.
		ok[connectionJSON](t, b.do(t, http.MethodPatch, "/v1/connections/for-acme", obj{"tenants": []string{"x"}}), http.StatusOK)
		ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+sub.ID, obj{"description": "d"}, withToken(tok.Token)), http.StatusOK)
		// The tenant never sees a connection URL: not in its subscription.
		got := b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID, nil, withToken(tok.Token))
		require.Equal(t, http.StatusOK, got.code)
		require.NotContains(t, string(got.body), "redis://")
		requireError(t, b.do(t, http.MethodGet, "/v1/connections", nil, withToken(tok.Token)), http.StatusForbidden, herald.CodeForbidden, "")
	})
}

// TestWebPushEndpointDev: an http endpoint is refused unless the server
// runs with --dev (AllowHTTPPushEndpoints); readers without
// subscriptions:write see neither the endpoint's path nor keys.auth.
func TestWebPushEndpointDev(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		dest := webPushDest(t, "http://127.0.0.1:8080/wpush/v2/tok")
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"destination": dest}),
			http.StatusBadRequest, herald.CodeInvalidField, "destination.subscription.endpoint")
		dev := &testBundle{store: s, handler: New(Config{Store: s, Publisher: failingPublisher{}, Auth: NewTokenAuth(s, testToken),
			AllowHTTPPushEndpoints: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})}
		sub := ok[subscriptionJSON](t, dev.do(t, http.MethodPost, "/v1/subscriptions", obj{"destination": dest}), http.StatusCreated)
		auth := dest["subscription"].(obj)["keys"].(obj)["auth"].(string)
		require.Equal(t, auth, sub.Destination.Subscription.Keys.Auth)

		reader := b.createToken(t, obj{"name": "reader", "scopes": []string{"subscriptions:read"}})
		res := b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID, nil, withToken(reader.Token))
		got := ok[subscriptionJSON](t, res, http.StatusOK)
		require.Equal(t, "http://127.0.0.1:8080/***", got.Destination.Subscription.Endpoint)
		require.Equal(t, "***", got.Destination.Subscription.Keys.Auth)
		require.NotContains(t, string(res.body), auth)
		require.NotContains(t, string(res.body), "/wpush/v2/tok")
	})
}

func refOf[T any](v T) *T { return &v }
