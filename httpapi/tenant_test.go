package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// allScopesButAdmin are the scopes of a customer's full-access token.
var allScopesButAdmin = []string{"events:publish", "events:read", "subscriptions:read", "subscriptions:write", "deliveries:read", "deliveries:write"}

// createToken makes a token through the API (as admin) and returns it.
func (b *testBundle) createToken(t *testing.T, body obj) tokenJSON {
	t.Helper()
	tok := ok[tokenJSON](t, b.do(t, http.MethodPost, "/v1/tokens", body), http.StatusCreated)
	require.True(t, strings.HasPrefix(tok.Token, TokenPrefix))
	return tok
}

// tenantWorld is tenant B's data, a tenant-A token, and an operator's
// all-tenants audit subscription.
type tenantWorld struct {
	tokA, tokB, pubA string
	subB, audit      string
	evB, dB, dAudit  string
	// producerB is an id tenant B chose for an event with two deliveries
	// (its subscription's and the audit one's): tenant A may use it too.
	producerB string
}

func newTenantWorld(t *testing.T, b *testBundle) *tenantWorld {
	t.Helper()
	w := &tenantWorld{}
	w.tokA = b.createToken(t, obj{"name": "acme", "scopes": allScopesButAdmin, "tenant": "acme"}).Token
	w.tokB = b.createToken(t, obj{"name": "globex", "scopes": allScopesButAdmin, "tenant": "globex"}).Token
	w.pubA = b.createToken(t, obj{"name": "acme publisher", "scopes": []string{"events:publish"}, "tenant": "acme"}).Token
	w.audit = b.createSub(t, obj{"all_tenants": true}).ID
	subB := ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://example.com/b"}, withToken(w.tokB)), http.StatusCreated)
	require.Equal(t, "globex", subB.Tenant, "a tenant token's subscription gets its tenant")
	w.subB = subB.ID
	pub := ok[publishJSON](t, b.do(t, http.MethodPost, "/v1/events", obj{"type": "order.created"}, withToken(w.tokB)), http.StatusAccepted)
	require.Equal(t, 2, pub.Deliveries, "the tenant's subscription and the audit one")
	w.evB = pub.ID
	for _, d := range b.deliveriesOf(t, w.evB) {
		if d.SubscriptionID == w.subB {
			w.dB = d.ID
		} else {
			w.dAudit = d.ID
		}
	}
	require.NotEmpty(t, w.dB)
	require.NotEmpty(t, w.dAudit)
	b.killDeliveries(t, []string{w.dB, w.dAudit}, time.Now().UTC())
	w.producerB = "order-1002"
	pub = ok[publishJSON](t, b.do(t, http.MethodPost, "/v1/events", obj{"id": w.producerB, "type": "order.created"}, withToken(w.tokB)), http.StatusAccepted)
	require.Equal(t, publishJSON{ID: w.producerB, Deliveries: 2}, pub)
	return w
}

// snapshot is what the matrix must leave unchanged, read as admin.
func (b *testBundle) snapshot(t *testing.T, w *tenantWorld) string {
	t.Helper()
	sub := b.do(t, http.MethodGet, "/v1/subscriptions/"+w.subB, nil)
	sec := b.do(t, http.MethodGet, "/v1/subscriptions/"+w.subB+"/secret", nil)
	events := b.do(t, http.MethodGet, "/v1/events?tenant=globex", nil)
	dl := b.do(t, http.MethodGet, "/v1/deliveries?tenant=globex", nil)
	toks := b.do(t, http.MethodGet, "/v1/tokens", nil)
	return fmt.Sprintf("%d %s\n%d %s\n%d %s\n%d %s\n%d %s", sub.code, sub.body, sec.code, sec.body,
		events.code, events.body, dl.code, dl.body, toks.code, toks.body)
}

// TestTenantIsolationMatrix: for every /v1 route, a tenant-A token aimed
// at tenant B's data gets 404 (an object by id), 403 (naming tenant B, or
// a route its scopes do not reach) or a listing without B's items, and
// changes nothing.
func TestTenantIsolationMatrix(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		w := newTenantWorld(t, b)
		// The catalog is every tenant's to read, the operator's to change.
		ok[eventTypeJSON](t, b.do(t, http.MethodPost, "/v1/event-types", obj{"name": "order.created",
			"description": "An order was created."}), http.StatusCreated)
		before := b.snapshot(t, w)

		type want struct {
			code int
			// absent are ids the (200) answer must not contain.
			absent []string
		}
		notFound, forbidden := want{code: http.StatusNotFound}, want{code: http.StatusForbidden}
		listing := want{code: http.StatusOK, absent: []string{w.subB, w.evB, w.dB, w.dAudit, w.audit}}
		// An event id is unique within its tenant (issue 20): tenant A's
		// event with tenant B's id is stored, and neither its first
		// answer nor its retry shows B's figures (2 deliveries).
		mine := func(wantDup bool) func(t *testing.T, res response) {
			return func(t *testing.T, res response) {
				var pub publishJSON
				require.NoError(t, json.Unmarshal(res.body, &pub))
				require.Equal(t, publishJSON{ID: w.producerB, Duplicate: wantDup, Deliveries: 1}, pub,
					"tenant A's own event, with its own count (the audit subscription's delivery)")
			}
		}
		replayDay := obj{"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
			"until": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
		cases := []struct {
			route, method, path string
			body                any
			want                want
			check               func(t *testing.T, res response)
		}{
			{"POST /v1/subscriptions", "POST", "/v1/subscriptions", obj{"url": "https://example.com/x", "tenant": "globex"}, forbidden, nil},
			{"POST /v1/subscriptions", "POST", "/v1/subscriptions", obj{"url": "https://example.com/x", "all_tenants": true}, forbidden, nil},
			{"GET /v1/subscriptions", "GET", "/v1/subscriptions", nil, listing, nil},
			{"GET /v1/subscriptions", "GET", "/v1/subscriptions?tenant=globex", nil, forbidden, nil},
			{"GET /v1/subscriptions/{id}", "GET", "/v1/subscriptions/" + w.subB, nil, notFound, nil},
			{"GET /v1/subscriptions/{id}", "GET", "/v1/subscriptions/" + w.audit, nil, notFound, nil},
			{"PATCH /v1/subscriptions/{id}", "PATCH", "/v1/subscriptions/" + w.subB, obj{"description": "x"}, notFound, nil},
			{"DELETE /v1/subscriptions/{id}", "DELETE", "/v1/subscriptions/" + w.subB, nil, notFound, nil},
			{"GET /v1/subscriptions/{id}/secret", "GET", "/v1/subscriptions/" + w.subB + "/secret", nil, notFound, nil},
			{"POST /v1/subscriptions/{id}/secret/rotate", "POST", "/v1/subscriptions/" + w.subB + "/secret/rotate", obj{}, notFound, nil},
			{"POST /v1/subscriptions/{id}/test", "POST", "/v1/subscriptions/" + w.subB + "/test", obj{}, notFound, nil},
			{"GET /v1/subscriptions/{id}/listen", "GET", "/v1/subscriptions/" + w.subB + "/listen", nil, notFound, nil},
			{"GET /v1/subscriptions/{id}/listen", "GET", "/v1/subscriptions/" + w.audit + "/listen", nil, notFound, nil},
			// Reads and changes no stored data: nothing to confine.
			{"POST /v1/filters/test", "POST", "/v1/filters/test", obj{"event": obj{"type": "a"}}, want{code: http.StatusOK}, nil},
			{"POST /v1/events", "POST", "/v1/events", obj{"type": "order.created", "tenant": "globex"}, forbidden, nil},
			{"POST /v1/events/batch", "POST", "/v1/events/batch", obj{"events": []obj{{"type": "order.created", "tenant": "globex"}}}, want{code: http.StatusOK}, nil},
			{"GET /v1/events", "GET", "/v1/events", nil, listing, nil},
			{"GET /v1/events", "GET", "/v1/events?tenant=globex", nil, forbidden, nil},
			{"GET /v1/events/{id}", "GET", "/v1/events/" + w.evB, nil, notFound, nil},
			{"GET /v1/events/{id}", "GET", "/v1/events/" + w.producerB, nil, notFound, nil},
			{"POST /v1/events", "POST", "/v1/events", obj{"id": w.producerB, "type": "order.created"}, want{code: http.StatusAccepted}, mine(false)},
			{"POST /v1/events", "POST", "/v1/events", obj{"id": w.producerB, "type": "order.created"}, want{code: http.StatusAccepted}, mine(true)},
			// Resend: B's event is not found for A, nor is B's subscription
			// for A's own event of the same id (stored by the rows above).
			{"POST /v1/events/{id}/resend", "POST", "/v1/events/" + w.evB + "/resend", obj{"subscription_id": w.subB}, notFound, nil},
			{"POST /v1/events/{id}/resend", "POST", "/v1/events/" + w.producerB + "/resend", obj{"subscription_id": w.subB}, notFound, nil},
			{"POST /v1/events/{id}/resend", "POST", "/v1/events/" + w.producerB + "/resend", obj{"subscription_id": w.audit}, notFound, nil},
			{"POST /v1/events/{id}/resend", "POST", "/v1/events/" + w.evB + "/resend?tenant=globex", obj{"subscription_id": w.subB}, forbidden, nil},
			{"POST /v1/subscriptions/{id}/replay", "POST", "/v1/subscriptions/" + w.subB + "/replay", replayDay, notFound, nil},
			{"POST /v1/subscriptions/{id}/replay", "POST", "/v1/subscriptions/" + w.audit + "/replay", replayDay, notFound, nil},
			{"POST /v1/events/batch", "POST", "/v1/events/batch", obj{"events": []obj{{"id": w.producerB, "type": "order.created"}}}, want{code: http.StatusOK},
				func(t *testing.T, res response) {
					var out batchJSON
					require.NoError(t, json.Unmarshal(res.body, &out))
					one := 1
					require.Equal(t, []batchResultJSON{{ID: w.producerB, Status: batchDuplicate, Deliveries: &one}}, out.Results)
				}},
			{"GET /v1/events/{id}", "GET", "/v1/events/" + w.producerB, nil, want{code: http.StatusOK}, func(t *testing.T, res response) {
				var ev eventJSON
				require.NoError(t, json.Unmarshal(res.body, &ev))
				require.Equal(t, "acme", ev.Tenant, "tenant A reads its own event with that id")
				require.Empty(t, ev.Deliveries, "the audit subscription's delivery is not tenant A's business")
			}},
			{"GET /v1/events/{id}", "GET", "/v1/events/" + w.producerB + "?tenant=globex", nil, forbidden, nil},
			{"GET /v1/deliveries", "GET", "/v1/deliveries", nil, listing, nil},
			{"GET /v1/deliveries", "GET", "/v1/deliveries?tenant=globex", nil, forbidden, nil},
			{"GET /v1/deliveries/{id}", "GET", "/v1/deliveries/" + w.dB, nil, notFound, nil},
			{"GET /v1/deliveries/{id}", "GET", "/v1/deliveries/" + w.dAudit, nil, notFound, nil},
			{"POST /v1/deliveries/{id}/retry", "POST", "/v1/deliveries/" + w.dB + "/retry", nil, notFound, nil},
			{"GET /v1/dead-letters", "GET", "/v1/dead-letters", nil, listing, nil},
			{"GET /v1/dead-letters", "GET", "/v1/dead-letters?tenant=globex", nil, forbidden, nil},
			{"POST /v1/dead-letters/redrive", "POST", "/v1/dead-letters/redrive", obj{"subscription_id": w.subB}, notFound, nil},
			{"GET /v1/stats", "GET", "/v1/stats", nil, forbidden, nil},
			{"GET /v1/stats/subscriptions", "GET", "/v1/stats/subscriptions", nil, listing, nil},
			{"GET /v1/stats/subscriptions", "GET", "/v1/stats/subscriptions?tenant=globex", nil, forbidden, nil},
			{"GET /v1/stats/history", "GET", "/v1/stats/history", nil, forbidden, nil},
			{"GET /v1/stats/tenants", "GET", "/v1/stats/tenants", nil, forbidden, nil},
			{"POST /v1/tokens", "POST", "/v1/tokens", obj{"name": "x", "scopes": []string{"admin"}}, forbidden, nil},
			{"POST /v1/connections", "POST", "/v1/connections", obj{"name": "x", "type": "redis", "url": "redis://h"}, forbidden, nil},
			{"GET /v1/connections", "GET", "/v1/connections", nil, forbidden, nil},
			{"GET /v1/connections/{name}", "GET", "/v1/connections/x", nil, forbidden, nil},
			{"PATCH /v1/connections/{name}", "PATCH", "/v1/connections/x", obj{"tenants": "all"}, forbidden, nil},
			{"DELETE /v1/connections/{name}", "DELETE", "/v1/connections/x", nil, forbidden, nil},
			{"POST /v1/sources", "POST", "/v1/sources", obj{"name": "x", "type": "redis", "connection": "x", "stream": "s"}, forbidden, nil},
			{"GET /v1/sources", "GET", "/v1/sources", nil, forbidden, nil},
			{"GET /v1/sources/{name}", "GET", "/v1/sources/x", nil, forbidden, nil},
			{"PATCH /v1/sources/{name}", "PATCH", "/v1/sources/x", obj{"enabled": false}, forbidden, nil},
			{"DELETE /v1/sources/{name}", "DELETE", "/v1/sources/x", nil, forbidden, nil},
			{"POST /v1/event-types", "POST", "/v1/event-types", obj{"name": "x"}, forbidden, nil},
			{"GET /v1/event-types", "GET", "/v1/event-types", nil, want{code: http.StatusOK}, func(t *testing.T, res response) {
				require.Contains(t, string(res.body), `"order.created"`)
			}},
			{"GET /v1/event-types/{name}", "GET", "/v1/event-types/order.created", nil, want{code: http.StatusOK}, nil},
			{"PATCH /v1/event-types/{name}", "PATCH", "/v1/event-types/order.created", obj{"deprecated": true}, forbidden, nil},
			{"DELETE /v1/event-types/{name}", "DELETE", "/v1/event-types/order.created", nil, forbidden, nil},
			{"GET /v1/tokens", "GET", "/v1/tokens", nil, forbidden, nil},
			{"DELETE /v1/tokens/{id}", "DELETE", "/v1/tokens/tok_x", nil, forbidden, nil},
			{"POST /v1/tenants/{tenant}/portal", "POST", "/v1/tenants/globex/portal", nil, forbidden, nil},
			{"POST /v1/tenants/{tenant}/portal", "POST", "/v1/tenants/acme/portal", nil, forbidden, nil},
			// Takes a link, not a bearer token: a token is no credential here.
			{"POST /v1/portal/sessions", "POST", "/v1/portal/sessions", obj{"link": "hrlp_guess"}, want{code: http.StatusUnauthorized}, nil},
		}
		covered := map[string]bool{}
		for _, c := range cases {
			covered[c.route] = true
			res := b.do(t, c.method, c.path, c.body, withToken(w.tokA))
			require.Equal(t, c.want.code, res.code, "%s %s: %s", c.method, c.path, res.body)
			switch c.want.code {
			case http.StatusNotFound:
				requireError(t, res, http.StatusNotFound, herald.CodeNotFound, "")
			case http.StatusForbidden:
				requireError(t, res, http.StatusForbidden, herald.CodeForbidden, "")
			case http.StatusUnauthorized:
				requireError(t, res, http.StatusUnauthorized, herald.CodeUnauthorized, "")
			}
			for _, id := range c.want.absent {
				require.NotContains(t, string(res.body), id, "%s %s", c.method, c.path)
			}
			if c.check != nil {
				c.check(t, res)
			} else if c.route == "POST /v1/events/batch" {
				require.Contains(t, string(res.body), `"rejected"`)
				require.Contains(t, string(res.body), `"forbidden"`)
			}
		}
		// The push broadcast routes are admin only.
		withPush := New(Config{Store: s, Publisher: failingPublisher{}, Auth: NewTokenAuth(s, testToken), Push: nopBroadcaster{}})
		pb := &testBundle{store: s, handler: withPush}
		for _, c := range []struct {
			route, method, path string
			body                any
		}{
			{"PUT /v1/push/broadcasts/{id...}", "PUT", "/v1/push/broadcasts/a", obj{"version": "1"}},
			{"GET /v1/push/broadcasts", "GET", "/v1/push/broadcasts", nil},
		} {
			covered[c.route] = true
			requireError(t, pb.do(t, c.method, c.path, c.body, withToken(w.tokA)), http.StatusForbidden, herald.CodeForbidden, "")
		}
		// Describes the caller's own token alone: tenant A learns only
		// that it is tenant A.
		covered["GET /v1/whoami"] = true
		who := b.do(t, http.MethodGet, "/v1/whoami", nil, withToken(w.tokA))
		require.Equal(t, http.StatusOK, who.code, "body: %s", who.body)
		require.Contains(t, string(who.body), `"tenant":"acme"`)
		require.NotContains(t, string(who.body), "globex")
		// Describes the caller's own portal alone: tenant A's token (no
		// link made it) has its tenant and no theme, never another's.
		covered["GET /v1/portal/sessions/current"] = true
		cur := b.do(t, http.MethodGet, "/v1/portal/sessions/current", nil, withToken(w.tokA))
		require.Equal(t, http.StatusOK, cur.code, "body: %s", cur.body)
		require.JSONEq(t, `{"tenant":"acme","theme":null}`, string(cur.body))
		// Acts on the caller's own token alone: run last, after the
		// snapshot (it changes the token list by revoking tokA).
		covered["DELETE /v1/portal/sessions/current"] = true
		for _, p := range Patterns(withPush) {
			if strings.Contains(p, " /v1/") {
				require.True(t, covered[p], "route %s is missing from the isolation matrix", p)
			}
		}
		require.Equal(t, before, b.snapshot(t, w), "tenant A's requests changed tenant B's data")
		res := b.do(t, http.MethodDelete, "/v1/portal/sessions/current", nil, withToken(w.tokA))
		require.Equal(t, http.StatusNoContent, res.code, "body: %s", res.body)
		requireError(t, b.do(t, http.MethodGet, "/v1/subscriptions", nil, withToken(w.tokA)), http.StatusUnauthorized, herald.CodeUnauthorized, "")

		// Both tenants' order-1002 exist. Tenant B reads its own; an
		// unconfined token names the tenant (?tenant=, empty for the
		// untenanted space) or is told the id is ambiguous.
		evB := ok[eventJSON](t, b.do(t, http.MethodGet, "/v1/events/"+w.producerB, nil, withToken(w.tokB)), http.StatusOK)
		require.Equal(t, "globex", evB.Tenant)
		require.Len(t, evB.Deliveries, 1)
		requireError(t, b.do(t, http.MethodGet, "/v1/events/"+w.producerB, nil), http.StatusConflict, herald.CodeConflict, "")
		for _, tenant := range []string{"acme", "globex"} {
			ev := ok[eventJSON](t, b.do(t, http.MethodGet, "/v1/events/"+w.producerB+"?tenant="+tenant, nil), http.StatusOK)
			require.Equal(t, tenant, ev.Tenant)
		}
		requireError(t, b.do(t, http.MethodGet, "/v1/events/"+w.producerB+"?tenant=", nil), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/events/"+w.producerB+"?tenant=a%20b", nil), http.StatusBadRequest, herald.CodeInvalidField, "tenant")
		ok[eventJSON](t, b.do(t, http.MethodGet, "/v1/events/"+w.evB, nil), http.StatusOK)

		// Tenant B sees its own, but not the audit subscription's delivery.
		ev := ok[eventJSON](t, b.do(t, http.MethodGet, "/v1/events/"+w.evB, nil, withToken(w.tokB)), http.StatusOK)
		require.Len(t, ev.Deliveries, 1)
		require.Equal(t, w.dB, ev.Deliveries[0].ID)
		require.Equal(t, "globex", ev.Tenant)
		ok[deliveryDetailJSON](t, b.do(t, http.MethodGet, "/v1/deliveries/"+w.dB, nil, withToken(w.tokB)), http.StatusOK)
		requireError(t, b.do(t, http.MethodGet, "/v1/deliveries/"+w.dAudit, nil, withToken(w.tokB)), http.StatusNotFound, herald.CodeNotFound, "")
		list := ok[listJSON[subscriptionJSON]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil, withToken(w.tokB)), http.StatusOK)
		require.Len(t, list.Data, 1)
		require.Equal(t, w.subB, list.Data[0].ID)
		// ...and may retry and redrive its own.
		ok[deliveryJSON](t, b.do(t, http.MethodPost, "/v1/deliveries/"+w.dB+"/retry", nil, withToken(w.tokB)), http.StatusAccepted)
		// ...and resend and replay its own events to its own subscription,
		// never to the audit one.
		ok[resendJSON](t, b.do(t, http.MethodPost, "/v1/events/"+w.evB+"/resend", obj{"subscription_id": w.subB}, withToken(w.tokB)), http.StatusAccepted)
		requireError(t, b.do(t, http.MethodPost, "/v1/events/"+w.evB+"/resend", obj{"subscription_id": w.audit}, withToken(w.tokB)),
			http.StatusNotFound, herald.CodeNotFound, "")
		dry := ok[replayJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions/"+w.subB+"/replay",
			obj{"since": replayDay["since"], "until": replayDay["until"], "dry_run": true}, withToken(w.tokB)), http.StatusOK)
		require.Equal(t, 2, dry.Matched, "tenant B's two events, not tenant A's order-1002")
	})
}

// TestScopedTokens: a publish-only token publishes (stamped with its
// tenant) and cannot read; an expired token and a revoked one get 401,
// the revoked one on a second node at its very next request.
func TestScopedTokens(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		node2 := setup(t, s)
		pub := b.createToken(t, obj{"name": "publisher", "scopes": []string{"events:publish"}, "tenant": "acme"})
		require.Equal(t, "acme", *pub.Tenant)
		require.Equal(t, []string{"events:publish"}, pub.Scopes)

		res := ok[publishJSON](t, b.do(t, http.MethodPost, "/v1/events", obj{"type": "a"}, withToken(pub.Token)), http.StatusAccepted)
		ev := ok[eventJSON](t, b.do(t, http.MethodGet, "/v1/events/"+res.ID, nil), http.StatusOK)
		require.Equal(t, "acme", ev.Tenant, "publishing stamps the token's tenant")
		for _, path := range []string{"/v1/events", "/v1/events/" + res.ID, "/v1/subscriptions", "/v1/deliveries", "/v1/dead-letters", "/v1/tokens", "/v1/stats"} {
			requireError(t, b.do(t, http.MethodGet, path, nil, withToken(pub.Token)), http.StatusForbidden, herald.CodeForbidden, "")
		}

		// The list never shows a token.
		list := ok[listJSON[tokenJSON]](t, b.do(t, http.MethodGet, "/v1/tokens", nil), http.StatusOK)
		require.NotContains(t, string(b.do(t, http.MethodGet, "/v1/tokens", nil).body), pub.Token)
		require.Len(t, list.Data, 1)
		require.Empty(t, list.Data[0].Token)

		// A token cannot revoke itself (the operator would be locked out).
		admin := b.createToken(t, obj{"name": "second admin", "scopes": []string{"admin"}})
		requireError(t, b.do(t, http.MethodDelete, "/v1/tokens/"+admin.ID, nil, withToken(admin.Token)), http.StatusConflict, herald.CodeConflict, "")
		require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/tokens/"+admin.ID, nil).code)

		// Expired.
		past := time.Now().Add(-time.Second)
		require.NoError(t, s.APITokenCreate(t.Context(), &store.APITokenCreateParams{
			Hash: HashToken("expired-token"), ID: "tok_expired", Name: "old", Scopes: []string{"admin"}, ExpiresAt: &past, Now: past.Add(-time.Hour),
		}))
		requireError(t, b.do(t, http.MethodGet, "/v1/stats", nil, withToken("expired-token")), http.StatusUnauthorized, herald.CodeUnauthorized, "")

		// Revoked on node 1: node 2 refuses it at the very next request.
		reader := b.createToken(t, obj{"name": "reader", "scopes": []string{"events:read"},
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		require.NotNil(t, reader.ExpiresAt)
		ok[listJSON[eventListItemJSON]](t, node2.do(t, http.MethodGet, "/v1/events", nil, withToken(reader.Token)), http.StatusOK)
		require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/tokens/"+reader.ID, nil).code)
		requireError(t, node2.do(t, http.MethodGet, "/v1/events", nil, withToken(reader.Token)), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		requireError(t, b.do(t, http.MethodDelete, "/v1/tokens/"+reader.ID, nil), http.StatusNotFound, herald.CodeNotFound, "")

		// Validation.
		for _, c := range []struct {
			body  obj
			code  herald.Code
			field string
		}{
			{obj{"scopes": []string{"admin"}}, herald.CodeMissingField, "name"},
			{obj{"name": "x"}, herald.CodeMissingField, "scopes"},
			{obj{"name": "x", "scopes": []string{"root"}}, herald.CodeInvalidField, "scopes[0]"},
			{obj{"name": "x", "scopes": []string{"admin"}, "tenant": "acme"}, herald.CodeInvalidField, "scopes"},
			{obj{"name": "x", "scopes": []string{"events:read"}, "tenant": "a b"}, herald.CodeInvalidField, "tenant"},
			{obj{"name": "x", "scopes": []string{"events:read"}, "expires_at": "2001-01-01T00:00:00Z"}, herald.CodeInvalidField, "expires_at"},
		} {
			requireError(t, b.do(t, http.MethodPost, "/v1/tokens", c.body), http.StatusBadRequest, c.code, c.field)
		}
	})
}

// TestTenantFields: tenants are validated, shown, fixed at creation, and
// listings filter by them.
func TestTenantFields(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		a := b.createSub(t, obj{"tenant": "acme"})
		require.Equal(t, "acme", a.Tenant)
		b.createSub(t, obj{})
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://example.com/x", "tenant": "a/b"}),
			http.StatusBadRequest, herald.CodeInvalidField, "tenant")
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://example.com/x", "tenant": "a", "all_tenants": true}),
			http.StatusBadRequest, herald.CodeInvalidField, "all_tenants")
		requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+a.ID, obj{"tenant": "other"}),
			http.StatusBadRequest, herald.CodeInvalidField, "tenant")
		requireError(t, b.do(t, http.MethodPost, "/v1/events", obj{"type": "a", "tenant": ""}),
			http.StatusBadRequest, herald.CodeInvalidField, "tenant")
		list := ok[listJSON[subscriptionJSON]](t, b.do(t, http.MethodGet, "/v1/subscriptions?tenant=acme", nil), http.StatusOK)
		require.Len(t, list.Data, 1)
		requireError(t, b.do(t, http.MethodGet, "/v1/events?tenant=a%20b", nil), http.StatusBadRequest, herald.CodeInvalidField, "tenant")

		pub := b.publish(t, obj{"type": "order.created", "tenant": "acme"})
		require.Equal(t, 1, pub.Deliveries)
		pub = b.publish(t, obj{"type": "order.created"})
		require.Equal(t, 1, pub.Deliveries, "an untenanted event reaches only the untenanted subscription")
		events := ok[listJSON[eventListItemJSON]](t, b.do(t, http.MethodGet, "/v1/events?tenant=acme", nil), http.StatusOK)
		require.Len(t, events.Data, 1)
		require.Equal(t, "acme", events.Data[0].Tenant)
	})
}

// Filters see the tenant: event.tenant in CEL.
func TestFilterSeesTenant(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		res := ok[map[string]bool](t, b.do(t, http.MethodPost, "/v1/filters/test", obj{
			"filter": obj{"cel": `event.tenant == "acme"`}, "event": obj{"type": "a", "tenant": "acme"},
		}), http.StatusOK)
		require.True(t, res["matched"])
	})
}
