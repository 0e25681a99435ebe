package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// sourceConnections creates one connection per broker type (rabbit, bus,
// rd, mq), each granted to tenant acme only.
func sourceConnections(t *testing.T, b *testBundle) {
	t.Helper()
	for _, c := range []obj{
		{"name": "rabbit", "type": "amqp", "url": "amqp://guest:guest@127.0.0.1:5672/"},
		{"name": "bus", "type": "nats", "url": "nats://127.0.0.1:4222"},
		{"name": "rd", "type": "redis", "url": "redis://127.0.0.1:6379/0"},
		{"name": "mq", "type": "mqtt", "url": "mqtt://127.0.0.1:1883"},
	} {
		c["tenants"] = []string{"acme"}
		ok[connectionJSON](t, b.do(t, http.MethodPost, "/v1/connections", c), http.StatusCreated)
	}
}

// TestSourceCRUD: create fills the defaults and shows every broker field
// of the type; GET adds the status the nodes reported; PATCH merges
// (mapping whole, null clears); DELETE removes.
func TestSourceCRUD(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sourceConnections(t, b)

		res := b.do(t, http.MethodPost, "/v1/sources", obj{"name": "publishing", "type": "amqp", "connection": "rabbit",
			"queue": "content-updates", "tenant": "acme", "ordered": true, "prefetch": 64,
			"mapping": obj{"key": " body.content_id ", "version": "body.payload_version", "type": "", "data": nil}})
		pub := ok[sourceJSON](t, res, http.StatusCreated)
		require.Equal(t, "/v1/sources/publishing", res.header.Get("Location"))
		require.Equal(t, sourceJSON{Name: "publishing", Type: herald.DestinationAMQP, Connection: "rabbit", Queue: new("content-updates"),
			Mapping: &herald.SourceMapping{Key: "body.content_id", Version: "body.payload_version"},
			Tenant:  "acme", Ordered: true, Enabled: true, Prefetch: 64, CreatedAt: pub.CreatedAt, UpdatedAt: pub.CreatedAt}, pub)
		require.NotContains(t, string(res.body), `"status"`)
		require.NotContains(t, string(res.body), `"stream"`, "no field of another type")

		// Defaults: the NATS durable and the Redis group are "herald",
		// an empty mapping is none, enabled is true unless said.
		n := ok[sourceJSON](t, b.do(t, http.MethodPost, "/v1/sources", obj{"name": "orders", "type": "nats", "connection": "bus",
			"stream": "ORDERS", "mapping": obj{"id": " "}}), http.StatusCreated)
		require.Equal(t, new("herald"), n.Durable)
		require.Equal(t, new(""), n.Subject)
		require.Equal(t, new("ORDERS"), n.Stream)
		require.Nil(t, n.Mapping)
		require.True(t, n.Enabled)
		require.Empty(t, n.Tenant)
		r := ok[sourceJSON](t, b.do(t, http.MethodPost, "/v1/sources", obj{"name": "jobs", "type": "redis", "connection": "rd",
			"stream": "jobs", "enabled": false}), http.StatusCreated)
		require.Equal(t, new("herald"), r.Group)
		require.False(t, r.Enabled)
		m := ok[sourceJSON](t, b.do(t, http.MethodPost, "/v1/sources", obj{"name": "sensors", "type": "mqtt", "connection": "mq",
			"topic": "sensors/+/temp"}), http.StatusCreated)
		require.Equal(t, new("sensors/+/temp"), m.Topic)
		stored, err := s.SourceGet(t.Context(), "orders")
		require.NoError(t, err)
		require.Equal(t, herald.DefaultSourceConsumer, stored.Durable, "the default is stored, not only shown")

		// GET: the source and its status; none reported yet is idle.
		got := ok[sourceJSON](t, b.do(t, http.MethodGet, "/v1/sources/publishing", nil), http.StatusOK)
		require.NotNil(t, got.Status)
		require.Equal(t, sourceStatusJSON{State: "idle", Nodes: []sourceNodeStatusJSON{}, RecentRejects: []sourceRejectJSON{}}, *got.Status)
		got.Status = nil
		require.Equal(t, pub, got)
		now := time.Now().UTC().Truncate(time.Millisecond)
		pending := int64(7)
		require.NoError(t, s.SourceReport(t.Context(), &store.SourceReportParams{Source: "publishing", Node: "node-a",
			State: herald.SourceConsuming, Consumed: 10, Duplicates: 2, Rejected: 1, Pending: &pending, LastError: "",
			Rejects: []herald.SourceReject{{At: now, Reason: herald.RejectNotJSON, Message: "the body is not JSON", MessageID: "m-1", Excerpt: "<xml"}},
			Now:     now}))
		got = ok[sourceJSON](t, b.do(t, http.MethodGet, "/v1/sources/publishing", nil), http.StatusOK)
		st := got.Status
		require.Equal(t, herald.SourceConsuming, st.State)
		require.Equal(t, int64(10), st.Consumed)
		require.Equal(t, int64(2), st.Duplicates)
		require.Equal(t, int64(1), st.Rejected)
		require.Equal(t, &pending, st.Pending)
		require.Len(t, st.Nodes, 1)
		require.Equal(t, "node-a", st.Nodes[0].Node)
		require.Equal(t, []sourceRejectJSON{{At: timestamp(now), Node: "node-a", Reason: herald.RejectNotJSON,
			Message: "the body is not JSON", MessageID: "m-1", Excerpt: "<xml"}}, st.RecentRejects)

		// List: name order, paged, without status.
		list := ok[listJSON[sourceJSON]](t, b.do(t, http.MethodGet, "/v1/sources", nil), http.StatusOK)
		require.Len(t, list.Data, 4)
		names := []string{}
		for _, src := range list.Data {
			names = append(names, src.Name)
			require.Nil(t, src.Status)
		}
		require.Equal(t, []string{"jobs", "orders", "publishing", "sensors"}, names)
		require.Nil(t, list.NextCursor)
		page := ok[listJSON[sourceJSON]](t, b.do(t, http.MethodGet, "/v1/sources?limit=3", nil), http.StatusOK)
		require.Len(t, page.Data, 3)
		require.NotNil(t, page.NextCursor)
		page = ok[listJSON[sourceJSON]](t, b.do(t, http.MethodGet, "/v1/sources?limit=3&cursor="+*page.NextCursor, nil), http.StatusOK)
		require.Len(t, page.Data, 1)
		require.Equal(t, "sensors", page.Data[0].Name)
		require.Nil(t, page.NextCursor)
		requireError(t, b.do(t, http.MethodGet, "/v1/sources?cursor=%21", nil), http.StatusBadRequest, herald.CodeInvalidCursor, "cursor")
		requireError(t, b.do(t, http.MethodGet, "/v1/sources?limit=0", nil), http.StatusBadRequest, herald.CodeInvalidField, "limit")

		// PATCH: the fields given replace; the mapping is replaced whole.
		p := ok[sourceJSON](t, b.do(t, http.MethodPatch, "/v1/sources/publishing", obj{"mapping": obj{"id": "headers.\"message-id\""},
			"enabled": false, "prefetch": nil, "queue": "content-updates-2"}), http.StatusOK)
		require.Equal(t, &herald.SourceMapping{ID: `headers."message-id"`}, p.Mapping)
		require.False(t, p.Enabled)
		require.Zero(t, p.Prefetch)
		require.Equal(t, new("content-updates-2"), p.Queue)
		require.Equal(t, "acme", p.Tenant, "a field not given is kept")
		require.True(t, p.Ordered)
		require.Equal(t, pub.CreatedAt, p.CreatedAt)
		// The answer sent back (name and type unchanged) is accepted;
		// enabled null keeps the current value.
		p = ok[sourceJSON](t, b.do(t, http.MethodPatch, "/v1/sources/publishing", obj{"name": "publishing", "type": "amqp",
			"mapping": nil, "tenant": nil, "ordered": false, "enabled": nil}), http.StatusOK)
		require.Nil(t, p.Mapping)
		require.Empty(t, p.Tenant)
		require.False(t, p.Ordered)
		require.False(t, p.Enabled)
		stored, err = s.SourceGet(t.Context(), "publishing")
		require.NoError(t, err)
		require.Nil(t, stored.Mapping)
		require.Equal(t, "content-updates-2", stored.Queue)
		// A broker field cleared takes its default again.
		n = ok[sourceJSON](t, b.do(t, http.MethodPatch, "/v1/sources/orders", obj{"durable": "other", "subject": "orders.>"}), http.StatusOK)
		require.Equal(t, new("other"), n.Durable)
		require.Equal(t, new("orders.>"), n.Subject)
		n = ok[sourceJSON](t, b.do(t, http.MethodPatch, "/v1/sources/orders", obj{"durable": nil, "subject": nil}), http.StatusOK)
		require.Equal(t, new("herald"), n.Durable)
		require.Equal(t, new(""), n.Subject)

		requireError(t, b.do(t, http.MethodPost, "/v1/sources", obj{"name": "orders", "type": "mqtt", "connection": "mq", "topic": "x"}),
			http.StatusConflict, herald.CodeConflict, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/sources/nope", nil), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodPatch, "/v1/sources/nope", obj{"enabled": true}), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodDelete, "/v1/sources/nope", nil), http.StatusNotFound, herald.CodeNotFound, "")

		res = b.do(t, http.MethodDelete, "/v1/sources/orders", nil)
		require.Equal(t, http.StatusNoContent, res.code, "body: %s", res.body)
		requireError(t, b.do(t, http.MethodGet, "/v1/sources/orders", nil), http.StatusNotFound, herald.CodeNotFound, "")
		list = ok[listJSON[sourceJSON]](t, b.do(t, http.MethodGet, "/v1/sources", nil), http.StatusOK)
		require.Len(t, list.Data, 3)
	})
}

// TestSourceValidation: every rule answers 400 naming the field, on
// create and on the source a PATCH merged; nothing refused is stored.
func TestSourceValidation(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sourceConnections(t, b)
		// with returns base changed by mods (nil: remove the field).
		with := func(base, mods obj) obj {
			body := obj{}
			for k, v := range base {
				body[k] = v
			}
			for k, v := range mods {
				if v == nil {
					delete(body, k)
				} else {
					body[k] = v
				}
			}
			return body
		}
		good := func(mods obj) obj {
			return with(obj{"name": "s1", "type": "amqp", "connection": "rabbit", "queue": "q"}, mods)
		}
		nats := func(mods obj) obj {
			return with(good(obj{"type": "nats", "connection": "bus", "queue": nil, "stream": "S"}), mods)
		}
		for _, tc := range []struct {
			name  string
			body  any
			code  herald.Code
			field string
		}{
			{"not an object", `[1]`, herald.CodeInvalidJSON, ""},
			{"unknown field", good(obj{"exchange": "x"}), herald.CodeUnknownField, "exchange"},
			{"status sent", good(obj{"status": obj{}}), herald.CodeUnknownField, "status"},
			{"no name", good(obj{"name": nil}), herald.CodeMissingField, "name"},
			{"name not a string", good(obj{"name": 1}), herald.CodeInvalidField, "name"},
			{"bad name", good(obj{"name": "a/b"}), herald.CodeInvalidField, "name"},
			{"long name", good(obj{"name": strings.Repeat("a", 65)}), herald.CodeInvalidField, "name"},
			{"no type", good(obj{"type": nil}), herald.CodeMissingField, "type"},
			{"webhook type", good(obj{"type": "webhook"}), herald.CodeInvalidField, "type"},
			{"unknown type", good(obj{"type": "kafka"}), herald.CodeInvalidField, "type"},
			{"no connection", good(obj{"connection": nil}), herald.CodeMissingField, "connection"},
			{"bad connection name", good(obj{"connection": "a b"}), herald.CodeInvalidField, "connection"},
			{"connection missing", good(obj{"connection": "ghost"}), herald.CodeInvalidField, "connection"},
			{"connection of another type", good(obj{"connection": "rd"}), herald.CodeInvalidField, "connection"},
			{"tenant not granted", good(obj{"tenant": "globex"}), herald.CodeInvalidField, "tenant"},
			{"bad tenant", good(obj{"tenant": "a b"}), herald.CodeInvalidField, "tenant"},
			{"amqp without queue", good(obj{"queue": nil}), herald.CodeMissingField, "queue"},
			{"amqp with stream", good(obj{"stream": "s"}), herald.CodeInvalidField, "stream"},
			{"amqp with topic", good(obj{"topic": "t"}), herald.CodeInvalidField, "topic"},
			{"queue not a string", good(obj{"queue": 5}), herald.CodeInvalidField, "queue"},
			{"queue with NUL", good(obj{"queue": "a\x00b"}), herald.CodeInvalidField, "queue"},
			{"nats without stream", nats(obj{"stream": nil}), herald.CodeMissingField, "stream"},
			{"nats stream with dot", nats(obj{"stream": "a.b"}), herald.CodeInvalidField, "stream"},
			{"nats bad durable", nats(obj{"durable": "a b"}), herald.CodeInvalidField, "durable"},
			{"nats bad subject", nats(obj{"subject": "a..b"}), herald.CodeInvalidField, "subject"},
			{"nats with group", nats(obj{"group": "g"}), herald.CodeInvalidField, "group"},
			{"redis without stream", good(obj{"type": "redis", "connection": "rd", "queue": nil}), herald.CodeMissingField, "stream"},
			{"redis with durable", good(obj{"type": "redis", "connection": "rd", "queue": nil, "stream": "s", "durable": "d"}), herald.CodeInvalidField, "durable"},
			{"mqtt without topic", good(obj{"type": "mqtt", "connection": "mq", "queue": nil}), herald.CodeMissingField, "topic"},
			{"mqtt shared topic", good(obj{"type": "mqtt", "connection": "mq", "queue": nil, "topic": "$share/g/t"}), herald.CodeInvalidField, "topic"},
			{"mqtt bad wildcard", good(obj{"type": "mqtt", "connection": "mq", "queue": nil, "topic": "a/#/b"}), herald.CodeInvalidField, "topic"},
			{"prefetch negative", good(obj{"prefetch": -1}), herald.CodeInvalidField, "prefetch"},
			{"prefetch too large", good(obj{"prefetch": herald.MaxSourcePrefetch + 1}), herald.CodeInvalidField, "prefetch"},
			{"prefetch fraction", good(obj{"prefetch": 1.5}), herald.CodeInvalidField, "prefetch"},
			{"prefetch string", good(obj{"prefetch": "10"}), herald.CodeInvalidField, "prefetch"},
			{"enabled string", good(obj{"enabled": "yes"}), herald.CodeInvalidField, "enabled"},
			{"ordered number", good(obj{"ordered": 1}), herald.CodeInvalidField, "ordered"},
			{"mapping not an object", good(obj{"mapping": "body.id"}), herald.CodeInvalidField, "mapping"},
			{"mapping unknown field", good(obj{"mapping": obj{"subject": "x"}}), herald.CodeUnknownField, "mapping.subject"},
			{"mapping not a string", good(obj{"mapping": obj{"id": 1}}), herald.CodeInvalidField, "mapping.id"},
			{"mapping bad expression", good(obj{"mapping": obj{"key": "body.[["}}), herald.CodeInvalidField, "mapping.key"},
			{"mapping too long", good(obj{"mapping": obj{"data": strings.Repeat("a", 4097)}}), herald.CodeInvalidField, "mapping.data"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := b.do(t, http.MethodPost, "/v1/sources", tc.body)
				requireError(t, res, http.StatusBadRequest, tc.code, tc.field)
			})
		}
		e := requireError(t, b.do(t, http.MethodPost, "/v1/sources", good(obj{"connection": "ghost"})), http.StatusBadRequest, herald.CodeInvalidField, "connection")
		require.Contains(t, e.Message, `no connection "ghost"`)
		e = requireError(t, b.do(t, http.MethodPost, "/v1/sources", good(obj{"connection": "rd"})), http.StatusBadRequest, herald.CodeInvalidField, "connection")
		require.Contains(t, e.Message, "redis connection")
		list := ok[listJSON[sourceJSON]](t, b.do(t, http.MethodGet, "/v1/sources", nil), http.StatusOK)
		require.Empty(t, list.Data, "nothing refused was stored")

		// A tenant the connection grants; a connection open to all.
		ok[sourceJSON](t, b.do(t, http.MethodPost, "/v1/sources", good(obj{"tenant": "acme"})), http.StatusCreated)
		ok[connectionJSON](t, b.do(t, http.MethodPost, "/v1/connections",
			obj{"name": "rabbit-all", "type": "amqp", "url": "amqp://127.0.0.1", "tenants": "all"}), http.StatusCreated)
		ok[sourceJSON](t, b.do(t, http.MethodPost, "/v1/sources", good(obj{"name": "s2", "connection": "rabbit-all", "tenant": "globex"})), http.StatusCreated)

		// PATCH checks the merged source as create does.
		for _, tc := range []struct {
			name  string
			body  obj
			code  herald.Code
			field string
		}{
			{"type changed", obj{"type": "nats"}, herald.CodeInvalidField, "type"},
			{"name changed", obj{"name": "s9"}, herald.CodeInvalidField, "name"},
			{"created_at", obj{"created_at": "2026-01-01T00:00:00Z"}, herald.CodeInvalidField, "created_at"},
			{"status", obj{"status": nil}, herald.CodeInvalidField, "status"},
			{"unknown field", obj{"exchange": "x"}, herald.CodeUnknownField, "exchange"},
			{"queue cleared", obj{"queue": nil}, herald.CodeMissingField, "queue"},
			{"field of another type", obj{"topic": "t"}, herald.CodeInvalidField, "topic"},
			{"connection of another type", obj{"connection": "bus"}, herald.CodeInvalidField, "connection"},
			{"connection missing", obj{"connection": "ghost"}, herald.CodeInvalidField, "connection"},
			{"tenant not granted", obj{"tenant": "globex"}, herald.CodeInvalidField, "tenant"},
			{"mapping bad expression", obj{"mapping": obj{"type": "body.[["}}, herald.CodeInvalidField, "mapping.type"},
			{"prefetch too large", obj{"prefetch": 1 << 40}, herald.CodeInvalidField, "prefetch"},
		} {
			t.Run("patch "+tc.name, func(t *testing.T) {
				requireError(t, b.do(t, http.MethodPatch, "/v1/sources/s1", tc.body), http.StatusBadRequest, tc.code, tc.field)
			})
		}
		stored, err := s.SourceGet(t.Context(), "s1")
		require.NoError(t, err)
		require.Equal(t, "q", stored.Queue)
		require.Equal(t, "rabbit", stored.Connection)
		require.Equal(t, "acme", stored.Tenant)
		require.Nil(t, stored.Mapping)
		// A connection's grant revoked: the tenant no longer passes a PATCH.
		ok[connectionJSON](t, b.do(t, http.MethodPatch, "/v1/connections/rabbit", obj{"tenants": []string{"globex"}}), http.StatusOK)
		requireError(t, b.do(t, http.MethodPatch, "/v1/sources/s1", obj{"enabled": false}), http.StatusBadRequest, herald.CodeInvalidField, "tenant")
		ok[sourceJSON](t, b.do(t, http.MethodPatch, "/v1/sources/s1", obj{"enabled": false, "tenant": "globex"}), http.StatusOK)
	})
}

// TestSourceTenantToken: sources are operator-owned; a tenant-confined
// token (never admin) and an unconfined one without the admin scope get
// 403 on every route.
func TestSourceTenantToken(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sourceConnections(t, b)
		ok[sourceJSON](t, b.do(t, http.MethodPost, "/v1/sources", obj{"name": "q", "type": "amqp", "connection": "rabbit", "queue": "q", "tenant": "acme"}),
			http.StatusCreated)
		confined := b.createToken(t, obj{"name": "acme", "tenant": "acme", "scopes": []string{"events:publish", "events:read",
			"subscriptions:read", "subscriptions:write", "deliveries:read", "deliveries:write"}})
		reader := b.createToken(t, obj{"name": "reader", "scopes": []string{"subscriptions:read", "events:read"}})
		for _, tok := range []string{confined.Token, reader.Token} {
			for _, c := range []struct {
				method, path string
				body         any
			}{
				{http.MethodPost, "/v1/sources", obj{"name": "x", "type": "amqp", "connection": "rabbit", "queue": "q"}},
				{http.MethodGet, "/v1/sources", nil},
				{http.MethodGet, "/v1/sources/q", nil},
				{http.MethodPatch, "/v1/sources/q", obj{"enabled": false}},
				{http.MethodDelete, "/v1/sources/q", nil},
			} {
				requireError(t, b.do(t, c.method, c.path, c.body, withToken(tok)), http.StatusForbidden, herald.CodeForbidden, "")
			}
		}
		got := ok[sourceJSON](t, b.do(t, http.MethodGet, "/v1/sources/q", nil), http.StatusOK)
		require.True(t, got.Enabled, "nothing changed")
	})
}

// TestConnectionDeleteInUseBySource: 409 naming the source; deleting the
// source frees the connection.
func TestConnectionDeleteInUseBySource(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sourceConnections(t, b)
		ok[sourceJSON](t, b.do(t, http.MethodPost, "/v1/sources", obj{"name": "feed", "type": "redis", "connection": "rd", "stream": "feed"}),
			http.StatusCreated)
		e := requireError(t, b.do(t, http.MethodDelete, "/v1/connections/rd", nil), http.StatusConflict, herald.CodeConflict, "")
		require.Contains(t, e.Message, "source feed")
		res := b.do(t, http.MethodDelete, "/v1/sources/feed", nil)
		require.Equal(t, http.StatusNoContent, res.code, "body: %s", res.body)
		res = b.do(t, http.MethodDelete, "/v1/connections/rd", nil)
		require.Equal(t, http.StatusNoContent, res.code, "body: %s", res.body)
	})
}
