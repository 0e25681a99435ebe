package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// setupPortal is setup with the API's (and token expiry's) clock under the test's control and
// a public URL.
func setupPortal(t *testing.T, s store.Store) (*testBundle, *clock) {
	t.Helper()
	ing := ingest.New(ingest.Config{Store: s})
	ing.Start()
	t.Cleanup(ing.Close)
	c := &clock{t: time.Now().UTC()}
	b := &testBundle{store: s}
	// Token expiry follows the same clock.
	auth := NewTokenAuth(s, testToken).(*TokenAuth)
	auth.now = c.Now
	b.handler = New(Config{
		Store: s, Publisher: ing, Auth: auth, Now: c.Now,
		PublicURL: "https://hooks.example.com/",
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return b, c
}

// linkOf returns the token in a portal URL's fragment.
func linkOf(t *testing.T, url string) string {
	t.Helper()
	base, link, found := strings.Cut(url, "/portal/#link=")
	require.True(t, found, url)
	require.Equal(t, "https://hooks.example.com", base)
	require.True(t, strings.HasPrefix(link, portalLinkPrefix), link)
	return link
}

func TestPortalLinkAndSession(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b, c := setupPortal(t, s)
		start := c.Now().Truncate(time.Millisecond)
		logo := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("\x89PNG fake"))
		res := b.do(t, http.MethodPost, "/v1/tenants/acme/portal", obj{
			"ttl_s": 600, "theme": obj{"name": "Example Corp", "accent": "#0b7285", "logo": logo},
		})
		require.Equal(t, "no-store", res.header.Get("Cache-Control"))
		pl := ok[portalLinkJSON](t, res, http.StatusCreated)
		require.Equal(t, timestamp(start.Add(10*time.Minute)), pl.ExpiresAt)
		link := linkOf(t, pl.URL)

		// No bearer token: the link is the credential. Another node (same
		// store) exchanges it.
		node2, _ := setupPortal(t, s)
		res = node2.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": link}, withoutToken())
		sess := ok[portalSessionJSON](t, res, http.StatusOK)
		require.Equal(t, "no-store", res.header.Get("Cache-Control"))
		require.Equal(t, "acme", sess.Tenant)
		require.Equal(t, pl.ExpiresAt, sess.ExpiresAt, "the session ends when the link would have")
		require.JSONEq(t, `{"name":"Example Corp","accent":"#0b7285","logo":"`+logo+`"}`, string(sess.Theme))
		require.True(t, strings.HasPrefix(sess.Token, TokenPrefix))

		// The session is a stored, listed, tenant-confined token.
		toks := ok[listJSON[tokenJSON]](t, b.do(t, http.MethodGet, "/v1/tokens", nil), http.StatusOK)
		require.Len(t, toks.Data, 1)
		require.Equal(t, "portal session", toks.Data[0].Name)
		require.Equal(t, "acme", *toks.Data[0].Tenant)
		require.ElementsMatch(t, []string{"subscriptions:read", "subscriptions:write", "deliveries:read", "deliveries:write", "events:read"}, toks.Data[0].Scopes)

		// The session works on the first node at once.
		ok[listJSON[subscriptionJSON]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil, withToken(sess.Token)), http.StatusOK)

		// Replay: the same link again is refused, with a message saying why.
		e := requireError(t, b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": link}, withoutToken()),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")
		require.Contains(t, e.Message, "expired or was already used")

		// Default TTL is an hour; an unused link refused once its hour passed.
		pl = ok[portalLinkJSON](t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", nil), http.StatusCreated)
		require.Equal(t, timestamp(start.Add(DefaultPortalTTL)), pl.ExpiresAt)
		c.Add(DefaultPortalTTL)
		requireError(t, b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": linkOf(t, pl.URL)}, withoutToken()),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")
		// ...and was not used by the refusal: a millisecond earlier it works.
		pl = ok[portalLinkJSON](t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", obj{"ttl_s": 1}), http.StatusCreated)
		c.Add(999 * time.Millisecond)
		ok[portalSessionJSON](t, b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": linkOf(t, pl.URL)}, withoutToken()), http.StatusOK)
	})
}

// TestPortalSessionConfined: a portal session reaches its tenant's data
// and nothing else.
func TestPortalSessionConfined(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b, _ := setupPortal(t, s)
		w := newTenantWorld(t, b) // tenant globex's data; tokA is acme's
		pl := ok[portalLinkJSON](t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", nil), http.StatusCreated)
		sess := ok[portalSessionJSON](t, b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": linkOf(t, pl.URL)}, withoutToken()), http.StatusOK)
		as := withToken(sess.Token)

		sub := ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://example.com/a"}, as), http.StatusCreated)
		require.Equal(t, "acme", sub.Tenant)
		ok[secretJSON](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID+"/secret", nil, as), http.StatusOK)
		list := ok[listJSON[subscriptionJSON]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil, as), http.StatusOK)
		require.Len(t, list.Data, 1)

		for _, path := range []string{"/v1/subscriptions/" + w.subB, "/v1/events/" + w.evB, "/v1/deliveries/" + w.dB} {
			requireError(t, b.do(t, http.MethodGet, path, nil, as), http.StatusNotFound, herald.CodeNotFound, "")
		}
		for _, path := range []string{"/v1/tokens", "/v1/stats", "/v1/stats/history"} {
			requireError(t, b.do(t, http.MethodGet, path, nil, as), http.StatusForbidden, herald.CodeForbidden, "")
		}
		// No publishing, no minting portal links (or tokens).
		requireError(t, b.do(t, http.MethodPost, "/v1/events", obj{"type": "a"}, as), http.StatusForbidden, herald.CodeForbidden, "")
		requireError(t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", nil, as), http.StatusForbidden, herald.CodeForbidden, "")
	})
}

func TestPortalValidation(t *testing.T) {
	t.Parallel()
	b, _ := setupPortal(t, testdb.SQLite(t))
	bigLogo := "data:image/png;base64," + base64.StdEncoding.EncodeToString(make([]byte, maxPortalLogo+1))
	for _, tc := range []struct {
		name  string
		path  string
		body  any
		field string
	}{
		{"ttl zero", "/v1/tenants/acme/portal", obj{"ttl_s": 0}, "ttl_s"},
		{"ttl over a day", "/v1/tenants/acme/portal", obj{"ttl_s": 86401}, "ttl_s"},
		{"ttl float", "/v1/tenants/acme/portal", obj{"ttl_s": 1.5}, "ttl_s"},
		{"unknown field", "/v1/tenants/acme/portal", obj{"tenant": "x"}, "tenant"},
		{"theme not object", "/v1/tenants/acme/portal", obj{"theme": "blue"}, "theme"},
		{"theme unknown", "/v1/tenants/acme/portal", obj{"theme": obj{"css": "x"}}, "theme.css"},
		{"accent", "/v1/tenants/acme/portal", obj{"theme": obj{"accent": "red"}}, "theme.accent"},
		{"logo http", "/v1/tenants/acme/portal", obj{"theme": obj{"logo": "https://example.com/a.png"}}, "theme.logo"},
		{"logo html", "/v1/tenants/acme/portal", obj{"theme": obj{"logo": "data:text/html;base64,PGI+"}}, "theme.logo"},
		{"logo base64", "/v1/tenants/acme/portal", obj{"theme": obj{"logo": "data:image/png;base64,!!!"}}, "theme.logo"},
		{"logo too big", "/v1/tenants/acme/portal", obj{"theme": obj{"logo": bigLogo}}, "theme.logo"},
		{"name too long", "/v1/tenants/acme/portal", obj{"theme": obj{"name": strings.Repeat("x", 101)}}, "theme.name"},
		{"bad tenant", "/v1/tenants/a%20b/portal", nil, "tenant"},
		{"session link missing", "/v1/portal/sessions", obj{}, "link"},
		{"session link not string", "/v1/portal/sessions", obj{"link": 1}, "link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := b.do(t, http.MethodPost, tc.path, tc.body)
			require.Equal(t, http.StatusBadRequest, res.code, "body: %s", res.body)
			require.Contains(t, string(res.body), `"field":"`+tc.field+`"`)
		})
	}
	// Garbage links are 401 whatever they look like, with or without a bearer token.
	for _, link := range []string{"x", portalLinkPrefix + "nope", strings.Repeat("a", maxTokenLen+1)} {
		requireError(t, b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": link}, withoutToken()),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")
	}
	// Creating a link needs a bearer token.
	requireError(t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", nil, withoutToken()),
		http.StatusUnauthorized, herald.CodeUnauthorized, "")
}

// TestPortalSessionEnd: "End session" revokes the session's token on the
// server, so the token is refused (401) on every route afterwards, on
// every node; tokens that are not portal sessions cannot use the route.
func TestPortalSessionEnd(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b, _ := setupPortal(t, s)
		pl := ok[portalLinkJSON](t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", nil), http.StatusCreated)
		sess := ok[portalSessionJSON](t, b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": linkOf(t, pl.URL)}, withoutToken()), http.StatusOK)
		as := withToken(sess.Token)
		ok[listJSON[subscriptionJSON]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil, as), http.StatusOK)

		// GET describes the session (no theme: the link had none); the
		// operator's tokens have no portal.
		cur := ok[portalCurrentJSON](t, b.do(t, http.MethodGet, "/v1/portal/sessions/current", nil, as), http.StatusOK)
		require.Equal(t, portalCurrentJSON{Tenant: "acme", Theme: json.RawMessage("null")}, cur)
		requireError(t, b.do(t, http.MethodGet, "/v1/portal/sessions/current", nil), http.StatusForbidden, herald.CodeForbidden, "")

		// Neither the operator's tokens nor an unconfined stored one end
		// themselves here (nothing is revoked).
		requireError(t, b.do(t, http.MethodDelete, "/v1/portal/sessions/current", nil), http.StatusForbidden, herald.CodeForbidden, "")
		reader := b.createToken(t, obj{"name": "reader", "scopes": []string{"events:read"}})
		requireError(t, b.do(t, http.MethodDelete, "/v1/portal/sessions/current", nil, withToken(reader.Token)),
			http.StatusForbidden, herald.CodeForbidden, "")
		ok[listJSON[eventJSON]](t, b.do(t, http.MethodGet, "/v1/events", nil, withToken(reader.Token)), http.StatusOK)
		requireError(t, b.do(t, http.MethodDelete, "/v1/portal/sessions/current", nil, withoutToken()),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")

		// Ended through another node (same store).
		node2, _ := setupPortal(t, s)
		res := node2.do(t, http.MethodDelete, "/v1/portal/sessions/current", nil, as)
		require.Equal(t, http.StatusNoContent, res.code, "body: %s", res.body)
		require.Empty(t, res.body)

		toks := ok[listJSON[tokenJSON]](t, b.do(t, http.MethodGet, "/v1/tokens", nil), http.StatusOK)
		for _, tok := range toks.Data {
			require.NotEqual(t, "portal session", tok.Name, "the session's token is revoked")
		}
		routes := RouteScopes(b.handler)
		require.Contains(t, routes, "DELETE /v1/portal/sessions/current")
		for pattern, scope := range routes {
			if scope == ScopePortalLink {
				continue // takes no bearer token
			}
			method, path, _ := strings.Cut(pattern, " ")
			path = strings.NewReplacer("{id...}", "x", "{id}", "x", "{tenant}", "acme").Replace(path)
			requireError(t, b.do(t, method, path, nil, as), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		}
	})
}

// withPortalCookie sends token as the portal's session cookie, without a
// bearer token; header adds the X-Herald-Portal header the portal's pages
// send with it.
func withPortalCookie(token string, header bool) reqOption {
	return func(r *http.Request) {
		r.Header.Del("Authorization")
		r.AddCookie(&http.Cookie{Name: PortalCookie, Value: token})
		if header {
			r.Header.Set(PortalHeader, "1")
		}
	}
}

// portalCookieOf returns the portal cookie a response sets, or nil.
func portalCookieOf(res response) *http.Cookie {
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		if c.Name == PortalCookie {
			return c
		}
	}
	return nil
}

// requireCookieCleared checks that res tells the browser to drop the
// portal cookie.
func requireCookieCleared(t *testing.T, res response) {
	t.Helper()
	c := portalCookieOf(res)
	require.NotNil(t, c, "no Set-Cookie %s in %v", PortalCookie, res.header)
	require.Empty(t, c.Value)
	require.Negative(t, c.MaxAge, "Max-Age=0 (deleted): %s", res.header.Get("Set-Cookie"))
	require.Equal(t, "/v1/", c.Path)
}

// TestPortalSessionCookie: the exchange sets the session as an HttpOnly,
// SameSite=Strict browser-session cookie scoped to /v1/ (Secure over
// https), so another tab continues the session; the API takes the cookie
// only with the X-Herald-Portal header and only for portal sessions, never
// an admin token; ending the session or its expiry clears it.
func TestPortalSessionCookie(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b, c := setupPortal(t, s) // --public-url https://hooks.example.com
		pl := ok[portalLinkJSON](t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", obj{"theme": obj{"name": "Example Corp"}}), http.StatusCreated)
		res := b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": linkOf(t, pl.URL)}, withoutToken())
		sess := ok[portalSessionJSON](t, res, http.StatusOK)
		ck := portalCookieOf(res)
		require.NotNil(t, ck, "no portal cookie: %v", res.header)
		require.Equal(t, sess.Token, ck.Value)
		require.True(t, ck.HttpOnly)
		require.True(t, ck.Secure, "https public URL")
		require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
		require.Equal(t, "/v1/", ck.Path)
		require.Zero(t, ck.MaxAge, "a browser-session cookie: %s", res.header.Get("Set-Cookie"))
		require.True(t, ck.Expires.IsZero(), "a browser-session cookie: %s", res.header.Get("Set-Cookie"))
		require.Empty(t, ck.Domain)

		// With the header: the cookie is the session, reads and writes.
		who := ok[whoamiResponse](t, b.do(t, http.MethodGet, "/v1/whoami", nil, withPortalCookie(ck.Value, true)), http.StatusOK)
		require.Equal(t, "acme", who.Tenant)
		require.False(t, who.Admin)
		sub := ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://example.com/a"},
			withPortalCookie(ck.Value, true)), http.StatusCreated)
		require.Equal(t, "acme", sub.Tenant)
		// The tab that has only the cookie reads the portal's theme.
		cur := ok[portalCurrentJSON](t, b.do(t, http.MethodGet, "/v1/portal/sessions/current", nil, withPortalCookie(ck.Value, true)), http.StatusOK)
		require.Equal(t, "acme", cur.Tenant)
		require.JSONEq(t, `{"name":"Example Corp"}`, string(cur.Theme))
		// Confined like the bearer token: no admin routes.
		requireError(t, b.do(t, http.MethodGet, "/v1/tokens", nil, withPortalCookie(ck.Value, true)), http.StatusForbidden, herald.CodeForbidden, "")

		// Without the header (a forged cross-site request): refused, on a
		// write and on a read, and nothing changed.
		e := requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+sub.ID, obj{"state": "disabled"}, withPortalCookie(ck.Value, false)),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")
		require.Contains(t, e.Message, PortalHeader)
		requireError(t, b.do(t, http.MethodDelete, "/v1/portal/sessions/current", nil, withPortalCookie(ck.Value, false)),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/subscriptions", nil, withPortalCookie(ck.Value, false)),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")
		require.Equal(t, herald.SubscriptionState("enabled"), ok[subscriptionJSON](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID, nil), http.StatusOK).State)

		// A bearer token wins over the cookie (the operator's dashboard in
		// the same browser stays the operator).
		ok[listJSON[tokenJSON]](t, b.do(t, http.MethodGet, "/v1/tokens", nil, func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: PortalCookie, Value: ck.Value})
			r.Header.Set(PortalHeader, "1")
		}), http.StatusOK)

		// Only portal sessions ride in the cookie: not the configured
		// admin token, a stored admin token, an unconfined one or a
		// tenant token with more than the portal's scopes.
		admin := b.createToken(t, obj{"name": "admin", "scopes": []string{"admin"}})
		reader := b.createToken(t, obj{"name": "reader", "scopes": []string{"events:read"}})
		publisher := b.createToken(t, obj{"name": "pub", "tenant": "acme", "scopes": []string{"events:publish", "subscriptions:read"}})
		for name, tok := range map[string]string{"--api-token": testToken, "admin": admin.Token, "unconfined": reader.Token, "publisher": publisher.Token} {
			for _, call := range []struct{ method, path string }{{http.MethodGet, "/v1/whoami"}, {http.MethodGet, "/v1/subscriptions"}, {http.MethodGet, "/v1/tokens"}} {
				res := b.do(t, call.method, call.path, nil, withPortalCookie(tok, true))
				require.Equal(t, http.StatusUnauthorized, res.code, "%s in the cookie: %s %s answered %s", name, call.method, call.path, res.body)
				requireError(t, res, http.StatusUnauthorized, herald.CodeUnauthorized, "")
				requireCookieCleared(t, res)
			}
		}
		// A plain tenant token within the portal's scopes is no more than a
		// portal session, so it qualifies.
		tenantReader := b.createToken(t, obj{"name": "acme reader", "tenant": "acme", "scopes": []string{"subscriptions:read"}})
		ok[listJSON[subscriptionJSON]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil, withPortalCookie(tenantReader.Token, true)), http.StatusOK)

		// End session by the cookie: revoked and the cookie cleared.
		res = b.do(t, http.MethodDelete, "/v1/portal/sessions/current", nil, withPortalCookie(ck.Value, true))
		require.Equal(t, http.StatusNoContent, res.code, "body: %s", res.body)
		requireCookieCleared(t, res)
		res = b.do(t, http.MethodGet, "/v1/whoami", nil, withPortalCookie(ck.Value, true))
		requireError(t, res, http.StatusUnauthorized, herald.CodeUnauthorized, "")
		requireCookieCleared(t, res)
		requireError(t, b.do(t, http.MethodGet, "/v1/whoami", nil, withToken(sess.Token)), http.StatusUnauthorized, herald.CodeUnauthorized, "")

		// End session by the bearer token (the tab that exchanged the
		// link) clears the cookie the other tabs use too.
		pl = ok[portalLinkJSON](t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", nil), http.StatusCreated)
		sess = ok[portalSessionJSON](t, b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": linkOf(t, pl.URL)}, withoutToken()), http.StatusOK)
		res = b.do(t, http.MethodDelete, "/v1/portal/sessions/current", nil, withToken(sess.Token))
		require.Equal(t, http.StatusNoContent, res.code, "body: %s", res.body)
		requireCookieCleared(t, res)

		// An expired session's cookie is refused and cleared.
		pl = ok[portalLinkJSON](t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", obj{"ttl_s": 60}), http.StatusCreated)
		res = b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": linkOf(t, pl.URL)}, withoutToken())
		require.Equal(t, http.StatusOK, res.code, "body: %s", res.body)
		ck = portalCookieOf(res)
		require.NotNil(t, ck)
		ok[whoamiResponse](t, b.do(t, http.MethodGet, "/v1/whoami", nil, withPortalCookie(ck.Value, true)), http.StatusOK)
		c.Add(time.Minute)
		res = b.do(t, http.MethodGet, "/v1/subscriptions", nil, withPortalCookie(ck.Value, true))
		requireError(t, res, http.StatusUnauthorized, herald.CodeUnauthorized, "")
		requireCookieCleared(t, res)
	})
}

// TestPortalSessionCookieHTTP: over plain http (herald serve --dev on
// 127.0.0.1, no https public URL) the cookie is not Secure, or the browser
// would not keep it.
func TestPortalSessionCookieHTTP(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		pl := ok[portalLinkJSON](t, b.do(t, http.MethodPost, "/v1/tenants/acme/portal", nil), http.StatusCreated)
		_, link, _ := strings.Cut(pl.URL, "#link=")
		res := b.do(t, http.MethodPost, "/v1/portal/sessions", obj{"link": link}, withoutToken())
		sess := ok[portalSessionJSON](t, res, http.StatusOK)
		ck := portalCookieOf(res)
		require.NotNil(t, ck)
		require.Equal(t, sess.Token, ck.Value)
		require.False(t, ck.Secure)
		require.True(t, ck.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	})
}
