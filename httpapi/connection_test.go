package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// TestConnectionCRUD: create, get, list and patch never answer the URL's
// password; "***" sent back keeps it; name and type are fixed.
func TestConnectionCRUD(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		const secret = "Sup3rSecretPw"
		noPassword := func(res response) {
			t.Helper()
			require.NotContains(t, string(res.body), secret)
			require.NotContains(t, string(res.body), "n4tsT0ken")
		}
		res := b.do(t, http.MethodPost, "/v1/connections", obj{"name": "rabbit-main", "type": "amqp",
			"url": "amqp://guest:" + secret + "@127.0.0.1:5672/vhost?heartbeat=10&password=" + secret,
			"tls": obj{"server_name": "rabbit.internal"}, "tenants": []string{"globex", "acme", "acme"}})
		noPassword(res)
		c := ok[connectionJSON](t, res, http.StatusCreated)
		require.Equal(t, "/v1/connections/rabbit-main", res.header.Get("Location"))
		require.Equal(t, "amqp://guest:***@127.0.0.1:5672/vhost?heartbeat=10&password=***", c.URL)
		require.Equal(t, []any{"acme", "globex"}, c.Tenants)
		require.Equal(t, &herald.ConnectionTLS{ServerName: "rabbit.internal"}, c.TLS)
		stored, err := s.ConnectionGet(t.Context(), "rabbit-main")
		require.NoError(t, err)
		require.Contains(t, stored.URL, "guest:"+secret+"@", "the store keeps the real URL")

		res = b.do(t, http.MethodGet, "/v1/connections/rabbit-main", nil)
		noPassword(res)
		require.Equal(t, c, ok[connectionJSON](t, res, http.StatusOK))

		res = b.do(t, http.MethodPost, "/v1/connections", obj{"name": "nats-1", "type": "nats", "url": "nats://n4tsT0ken@127.0.0.1:4222", "tenants": "all"})
		noPassword(res)
		n := ok[connectionJSON](t, res, http.StatusCreated)
		require.Equal(t, "nats://***@127.0.0.1:4222", n.URL, "a NATS URL's lone user is a token")
		require.Equal(t, "all", n.Tenants)
		require.Nil(t, n.TLS)

		res = b.do(t, http.MethodGet, "/v1/connections", nil)
		noPassword(res)
		list := ok[listJSON[connectionJSON]](t, res, http.StatusOK)
		require.Len(t, list.Data, 2)
		require.Equal(t, "nats-1", list.Data[0].Name)
		require.Nil(t, list.NextCursor)
		page := ok[listJSON[connectionJSON]](t, b.do(t, http.MethodGet, "/v1/connections?limit=1", nil), http.StatusOK)
		require.Len(t, page.Data, 1)
		require.NotNil(t, page.NextCursor)
		page = ok[listJSON[connectionJSON]](t, b.do(t, http.MethodGet, "/v1/connections?limit=1&cursor="+*page.NextCursor, nil), http.StatusOK)
		require.Equal(t, "rabbit-main", page.Data[0].Name)
		requireError(t, b.do(t, http.MethodGet, "/v1/connections?cursor=%21", nil), http.StatusBadRequest, herald.CodeInvalidCursor, "cursor")

		// The answer's URL sent back keeps the password; tenants change.
		res = b.do(t, http.MethodPatch, "/v1/connections/rabbit-main", obj{"url": "amqp://guest:***@127.0.0.1:5672/other", "tenants": nil, "tls": nil})
		noPassword(res)
		p := ok[connectionJSON](t, res, http.StatusOK)
		require.Equal(t, "amqp://guest:***@127.0.0.1:5672/other", p.URL)
		require.Equal(t, []any{}, p.Tenants)
		require.Nil(t, p.TLS)
		stored, err = s.ConnectionGet(t.Context(), "rabbit-main")
		require.NoError(t, err)
		require.Equal(t, "amqp://guest:"+secret+"@127.0.0.1:5672/other", stored.URL)
		res = b.do(t, http.MethodPatch, "/v1/connections/nats-1", obj{"url": "tls://***@127.0.0.1:4222"})
		noPassword(res)
		stored, err = s.ConnectionGet(t.Context(), "nats-1")
		require.NoError(t, err)
		require.Equal(t, "tls://n4tsT0ken@127.0.0.1:4222", stored.URL)
		// A new password replaces it.
		res = b.do(t, http.MethodPatch, "/v1/connections/rabbit-main", obj{"url": "amqps://guest:" + secret + "2@h/"})
		noPassword(res)
		stored, err = s.ConnectionGet(t.Context(), "rabbit-main")
		require.NoError(t, err)
		require.Equal(t, "amqps://guest:"+secret+"2@h/", stored.URL)

		requireError(t, b.do(t, http.MethodPost, "/v1/connections", obj{"name": "rabbit-main", "type": "amqp", "url": "amqp://h"}),
			http.StatusConflict, herald.CodeConflict, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/connections/nope", nil), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodPatch, "/v1/connections/nope", obj{"tenants": "all"}), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodDelete, "/v1/connections/nope", nil), http.StatusNotFound, herald.CodeNotFound, "")
	})
}

// TestConnectionValidation: every rule answers 400 naming the field.
func TestConnectionValidation(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		good := func(mods obj) obj {
			body := obj{"name": "c1", "type": "redis", "url": "redis://127.0.0.1:6379"}
			for k, v := range mods {
				if v == nil {
					delete(body, k)
				} else {
					body[k] = v
				}
			}
			return body
		}
		for _, tc := range []struct {
			name  string
			body  obj
			code  herald.Code
			field string
		}{
			{"no name", good(obj{"name": nil}), herald.CodeMissingField, "name"},
			{"bad name", good(obj{"name": "a/b"}), herald.CodeInvalidField, "name"},
			{"long name", good(obj{"name": strings.Repeat("a", 65)}), herald.CodeInvalidField, "name"},
			{"no type", good(obj{"type": nil}), herald.CodeMissingField, "type"},
			{"webhook type", good(obj{"type": "webhook"}), herald.CodeInvalidField, "type"},
			{"unknown type", good(obj{"type": "kafka"}), herald.CodeInvalidField, "type"},
			{"no url", good(obj{"url": nil}), herald.CodeMissingField, "url"},
			{"url of another type", good(obj{"url": "amqp://127.0.0.1"}), herald.CodeInvalidField, "url"},
			{"amqp as http", good(obj{"type": "amqp", "url": "http://127.0.0.1"}), herald.CodeInvalidField, "url"},
			{"nats as nats+tls", good(obj{"type": "nats", "url": "https://127.0.0.1"}), herald.CodeInvalidField, "url"},
			{"mqtt as ws", good(obj{"type": "mqtt", "url": "ws://127.0.0.1"}), herald.CodeInvalidField, "url"},
			{"url without host", good(obj{"url": "redis://"}), herald.CodeInvalidField, "url"},
			{"tenants bad", good(obj{"tenants": []string{"a b"}}), herald.CodeInvalidField, "tenants"},
			{"tenants word", good(obj{"tenants": "some"}), herald.CodeInvalidField, "tenants"},
			{"tls not object", good(obj{"tls": "yes"}), herald.CodeInvalidField, "tls"},
			{"tls cert without key", good(obj{"tls": obj{"cert_file": "/c.pem"}}), herald.CodeInvalidField, "tls.cert_file"},
			{"tls unknown", good(obj{"tls": obj{"verify": false}}), herald.CodeUnknownField, "tls.verify"},
			{"unknown field", good(obj{"password": "x"}), herald.CodeUnknownField, "password"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := b.do(t, http.MethodPost, "/v1/connections", tc.body)
				requireError(t, res, http.StatusBadRequest, tc.code, tc.field)
			})
		}
		// A URL that does not parse is refused without echoing it.
		res := b.do(t, http.MethodPost, "/v1/connections", good(obj{"url": "redis://:pa%zzss@h"}))
		requireError(t, res, http.StatusBadRequest, herald.CodeInvalidField, "url")
		require.NotContains(t, string(res.body), "pa%zzss")

		ok[connectionJSON](t, b.do(t, http.MethodPost, "/v1/connections", good(nil)), http.StatusCreated)
		for _, f := range []string{"name", "type", "created_at"} {
			requireError(t, b.do(t, http.MethodPatch, "/v1/connections/c1", obj{f: "x"}), http.StatusBadRequest, herald.CodeInvalidField, f)
		}
		requireError(t, b.do(t, http.MethodPatch, "/v1/connections/c1", obj{"url": "nats://h"}), http.StatusBadRequest, herald.CodeInvalidField, "url")
		requireError(t, b.do(t, http.MethodPatch, "/v1/connections/c1", obj{"url": nil}), http.StatusBadRequest, herald.CodeMissingField, "url")
	})
}

// TestConnectionDeleteInUse: 409 naming a live subscription; a deleted
// subscription does not hold the connection.
func TestConnectionDeleteInUse(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		ok[connectionJSON](t, b.do(t, http.MethodPost, "/v1/connections",
			obj{"name": "mq", "type": "mqtt", "url": "mqtt://u:p@127.0.0.1:1883"}), http.StatusCreated)
		sub := ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions",
			obj{"destination": obj{"type": "mqtt", "connection": "mq"}}), http.StatusCreated)
		e := requireError(t, b.do(t, http.MethodDelete, "/v1/connections/mq", nil), http.StatusConflict, herald.CodeConflict, "")
		require.Contains(t, e.Message, sub.ID)
		ok[connectionJSON](t, b.do(t, http.MethodGet, "/v1/connections/mq", nil), http.StatusOK)

		res := b.do(t, http.MethodDelete, "/v1/subscriptions/"+sub.ID, nil)
		require.Equal(t, http.StatusNoContent, res.code)
		res = b.do(t, http.MethodDelete, "/v1/connections/mq", nil)
		require.Equal(t, http.StatusNoContent, res.code, "body: %s", res.body)
		requireError(t, b.do(t, http.MethodGet, "/v1/connections/mq", nil), http.StatusNotFound, herald.CodeNotFound, "")
	})
}

func TestRedactConnectionURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ      herald.DestinationType
		in, want string
	}{
		{herald.DestinationAMQP, "amqp://guest:guest@h:5672/", "amqp://guest:***@h:5672/"},
		{herald.DestinationRedis, "redis://:pw@h:6379/0", "redis://:***@h:6379/0"},
		{herald.DestinationRedis, "redis://user@h", "redis://user@h"},
		{herald.DestinationNATS, "nats://tok@h:4222", "nats://***@h:4222"},
		{herald.DestinationMQTT, "mqtt://h:1883", "mqtt://h:1883"},
		{herald.DestinationMQTT, "mqtt://u:p%40ss@h?token=abc&x=1", "mqtt://u:***@h?token=***&x=1"},
		{herald.DestinationAMQP, "", ""},
	} {
		require.Equal(t, tc.want, redactConnectionURL(tc.typ, tc.in), tc.in)
	}
}
