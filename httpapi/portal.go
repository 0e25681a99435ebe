package httpapi

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// The consumer portal: POST /v1/tenants/{tenant}/portal (a link), POST
// /v1/portal/sessions (the exchange), GET and DELETE
// /v1/portal/sessions/current.

// Consumer-portal limits (ADR 0015).
const (
	// DefaultPortalTTL is how long a portal link (and the session it is
	// exchanged for) lasts when the create call names no ttl_s.
	DefaultPortalTTL = time.Hour
	// MaxPortalTTL is the longest a portal link may last.
	MaxPortalTTL = 24 * time.Hour
	// maxPortalLogo bounds a theme's logo (decoded bytes): it travels in
	// every session answer.
	maxPortalLogo = 64 << 10
	// maxPortalName bounds a theme's name (characters).
	maxPortalName = 100
	// portalLinkPrefix starts portal link tokens, so one pasted where an
	// API token belongs is recognisable.
	portalLinkPrefix = "hrlp_"
)

// The portal's session cookie (ADR 0025). The exchange sets it beside
// the token it answers, so a portal page opened in another tab of the same
// browser (which has none of the first tab's sessionStorage) continues the
// session instead of showing "link expired".
const (
	// PortalCookie names the cookie; its value is the session's token.
	// HttpOnly keeps it from the page's scripts, SameSite=Strict from
	// other sites' requests, Path=/v1/ from everything but the API the
	// portal's scripts call (the pages themselves need no credential). It
	// has no Max-Age or Expires: it lasts the browser session, and the
	// token's own expiry (the link's) ends it on the server before that.
	// Secure whenever the browser reached herald over https (secureCookie).
	PortalCookie = "herald_portal"
	// PortalHeader must accompany the cookie, with the value "1", for the
	// cookie to count as a credential (portalCookieToken): a page on
	// another origin cannot set a custom header without a CORS preflight,
	// which herald never grants, so a forged form post, image or
	// navigation arrives without it. SameSite=Strict alone would leave
	// sibling subdomains (same site, other origin) and older browsers.
	PortalHeader = "X-Herald-Portal"
	// portalCookiePath scopes the cookie to the API.
	portalCookiePath = "/v1/"
)

// portalCookieToken returns the portal cookie's token when the request
// carries no bearer token: "" without a cookie, an error when the cookie
// comes without PortalHeader. Required on every method, reads included,
// so the rule has no exception to reason about: only the portal's own
// scripts send it.
func portalCookieToken(r *http.Request) (string, error) {
	c, err := r.Cookie(PortalCookie)
	if err != nil || c.Value == "" {
		return "", nil
	}
	if r.Header.Get(PortalHeader) != "1" {
		return "", herald.Errorf(herald.CodeUnauthorized,
			"the portal's session cookie counts only with the header \"%s: 1\" (the portal's pages send it); other clients send \"Authorization: Bearer <token>\"", PortalHeader)
	}
	return c.Value, nil
}

// isPortalSession reports whether p may authenticate by the portal cookie:
// a stored token confined to a tenant with no scope beyond PortalScopes,
// which is what every portal session is. The configured --api-token, admin
// and unconfined tokens are refused even if someone puts them in the
// cookie: an ambient credential must never carry more than a portal does.
func isPortalSession(p *Principal) bool {
	if p.TokenID == "" || p.Tenant == "" {
		return false
	}
	for _, sc := range p.Scopes {
		if !slices.Contains(PortalScopes, sc) {
			return false
		}
	}
	return true
}

// secureCookie reports whether the browser reached herald over https:
// TLS here, or a --public-url of https (TLS ends at a proxy in front).
// Plain http (herald serve --dev on 127.0.0.1) gets no Secure attribute,
// which the browser would otherwise refuse to store.
func (s *server) secureCookie(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(s.cfg.PublicURL), "https://")
}

func (s *server) setPortalCookie(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: Secure over https only (secureCookie); a browser drops a Secure cookie on plain http (--dev)
		Name: PortalCookie, Value: token, Path: portalCookiePath,
		HttpOnly: true, Secure: s.secureCookie(r), SameSite: http.SameSiteStrictMode,
	})
}

// clearPortalCookie tells the browser to drop the portal cookie.
func (s *server) clearPortalCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: as setPortalCookie; this one deletes the cookie
		Name: PortalCookie, Path: portalCookiePath, MaxAge: -1,
		HttpOnly: true, Secure: s.secureCookie(r), SameSite: http.SameSiteStrictMode,
	})
}

// PortalScopes are the scopes of a portal session: the tenant's own
// subscriptions, deliveries and events — never publish, never admin.
var PortalScopes = []Scope{
	ScopeSubscriptionsRead, ScopeSubscriptionsWrite, ScopeDeliveriesRead, ScopeDeliveriesWrite, ScopeEventsRead,
}

var (
	accentRE = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)
	logoRE   = regexp.MustCompile(`^data:image/(png|svg\+xml|jpeg|webp);base64,`)
)

// portalTheme is what a portal looks like: all optional.
type portalTheme struct {
	Name   string `json:"name,omitempty"`
	Accent string `json:"accent,omitempty"`
	Logo   string `json:"logo,omitempty"`
}

type portalLinkJSON struct {
	URL       string `json:"url"`
	ExpiresAt string `json:"expires_at"`
}

type portalSessionJSON struct {
	Token     string          `json:"token"`
	Tenant    string          `json:"tenant"`
	ExpiresAt string          `json:"expires_at"`
	Theme     json.RawMessage `json:"theme"`
}

// parseTheme validates the theme object of a portal create call.
func parseTheme(raw json.RawMessage) (*portalTheme, error) {
	o, err := parseObject(raw, "theme")
	if err != nil {
		return nil, err
	}
	if err := o.allow("name", "accent", "logo"); err != nil {
		return nil, err
	}
	var t portalTheme
	if _, err := o.str("name", &t.Name); err != nil {
		return nil, err
	}
	if n := utf8.RuneCountInString(t.Name); n > maxPortalName {
		return nil, invalid("theme.name", "must be at most %d characters, got %d", maxPortalName, n)
	}
	if strings.IndexFunc(t.Name, unicode.IsControl) >= 0 {
		return nil, invalid("theme.name", "must not contain control characters")
	}
	if set, err := o.str("accent", &t.Accent); err != nil {
		return nil, err
	} else if set && !accentRE.MatchString(t.Accent) {
		return nil, invalid("theme.accent", "must be a colour #rrggbb, e.g. #0b7285")
	}
	if set, err := o.str("logo", &t.Logo); err != nil {
		return nil, err
	} else if set {
		m := logoRE.FindString(t.Logo)
		if m == "" {
			return nil, invalid("theme.logo", "must be a data: URL of a PNG, SVG, JPEG or WebP image in base64 (data:image/png;base64,…)")
		}
		b, err := base64.StdEncoding.DecodeString(t.Logo[len(m):])
		if err != nil {
			return nil, invalid("theme.logo", "has invalid base64")
		}
		if len(b) > maxPortalLogo {
			return nil, invalid("theme.logo", "must be at most %d bytes, got %d", maxPortalLogo, len(b))
		}
	}
	return &t, nil
}

// portalCreate answers POST /v1/tenants/{tenant}/portal: a link that opens
// the dashboard confined to the tenant, exchangeable once for a session.
// The link's token is in the URL's fragment, which browsers send neither
// to the server nor in a Referer.
func (s *server) portalCreate(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant")
	if !herald.ValidTenant(tenant) {
		return invalid("tenant", "must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", herald.MaxTenantLen)
	}
	body, err := readBody(w, r, s.smallLimit(PortalBodyBytes))
	if err != nil {
		return err
	}
	o := object{fields: map[string]json.RawMessage{}}
	if len(strings.TrimSpace(string(body))) > 0 {
		if o, err = parseBody(body); err != nil {
			return err
		}
	}
	if err := o.allow("ttl_s", "theme"); err != nil {
		return err
	}
	ttl := DefaultPortalTTL
	var secs int64
	if set, err := o.integer("ttl_s", &secs); err != nil {
		return err
	} else if set {
		if secs < 1 || secs > int64(MaxPortalTTL/time.Second) {
			return invalid("ttl_s", "must be 1 to %d seconds, got %d", int64(MaxPortalTTL/time.Second), secs)
		}
		ttl = time.Duration(secs) * time.Second
	}
	var theme json.RawMessage
	if raw, ok := o.get("theme"); ok {
		t, err := parseTheme(raw)
		if err != nil {
			return err
		}
		if theme, err = json.Marshal(t); err != nil {
			return err
		}
	}
	now := s.now()
	token := newPortalLinkToken()
	p := &store.PortalLinkCreateParams{
		ID: herald.NewID(herald.PrefixPortalLink), Hash: HashToken(token), Tenant: tenant,
		Theme: theme, ExpiresAt: now.Add(ttl), Now: now,
	}
	if err := s.store.PortalLinkCreate(r.Context(), p); err != nil {
		return err
	}
	noStore(w)
	return s.reply(w, http.StatusCreated, portalLinkJSON{
		URL:       s.publicURL(r) + "/portal/#link=" + token,
		ExpiresAt: timestamp(p.ExpiresAt),
	})
}

// publicURL is the base URL links point at: Config.PublicURL, else the
// request's own host over http.
func (s *server) publicURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimSuffix(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func newPortalLinkToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return portalLinkPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// errPortalLink is the one answer to a link that cannot be exchanged:
// the caller learns nothing about which of unknown, used or expired it was.
var errPortalLink = herald.Errorf(herald.CodeUnauthorized,
	"this portal link has expired or was already used; ask for a new one")

// portalSession answers POST /v1/portal/sessions. It takes no bearer
// token: the link in the body is the credential, consumed here once. The
// answer is a stored API token confined to the link's tenant with
// PortalScopes, expiring when the link would have, so it is listed by
// GET /v1/tokens and revocable like any other. The same token is set as
// the PortalCookie, so the browser's other tabs share the session.
func (s *server) portalSession(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, s.smallLimit(PortalSessionBodyBytes))
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := o.allow("link"); err != nil {
		return err
	}
	var link string
	if set, err := o.str("link", &link); err != nil {
		return err
	} else if !set || link == "" {
		return herald.FieldErrorf(herald.CodeMissingField, "link", "link is required: the token after #link= in the portal URL")
	}
	if len(link) > maxTokenLen {
		return errPortalLink
	}
	now := s.now()
	l, err := s.store.PortalLinkConsume(r.Context(), &store.PortalLinkConsumeParams{Hash: HashToken(link), Now: now})
	if errors.Is(err, herald.ErrNotFound) {
		return errPortalLink
	}
	if err != nil {
		return err
	}
	token := NewToken()
	scopes := make([]string, len(PortalScopes))
	for i, sc := range PortalScopes {
		scopes[i] = string(sc)
	}
	expires := l.ExpiresAt
	if err := s.store.APITokenCreate(r.Context(), &store.APITokenCreateParams{
		ID: portalSessionID(l.ID), Hash: HashToken(token), Name: "portal session",
		Scopes: scopes, Tenant: l.Tenant, ExpiresAt: &expires, Now: now,
	}); err != nil {
		return err
	}
	theme := l.Theme
	if len(theme) == 0 {
		theme = json.RawMessage("null")
	}
	s.setPortalCookie(w, r, token)
	noStore(w)
	return s.reply(w, http.StatusOK, portalSessionJSON{
		Token: token, Tenant: l.Tenant, ExpiresAt: timestamp(l.ExpiresAt), Theme: theme,
	})
}

// portalSessionID is the id of the session token a link is exchanged
// for: the link's id under the token prefix (pl_X → tok_X). A link is
// exchanged once, so the id is unique, and a session finds its link (its
// theme) without a column of its own: portalLinkID is the inverse.
func portalSessionID(linkID string) string {
	return herald.PrefixToken + strings.TrimPrefix(linkID, herald.PrefixPortalLink)
}

func portalLinkID(tokenID string) string {
	return herald.PrefixPortalLink + strings.TrimPrefix(tokenID, herald.PrefixToken)
}

// portalCurrentJSON is the body of GET /v1/portal/sessions/current.
type portalCurrentJSON struct {
	Tenant string          `json:"tenant"`
	Theme  json.RawMessage `json:"theme"`
}

// portalSessionCurrent answers GET /v1/portal/sessions/current: the
// calling session's tenant and its link's theme. A portal tab opened
// beside the one that exchanged the link has only the browser's cookie;
// it asks here what the portal looks like. The theme is null for a
// tenant token that no link made, or once the link row is gone (deleted
// a day after it expired, long after the session did).
func (s *server) portalSessionCurrent(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	if p.TokenID == "" || p.Tenant == "" {
		return herald.Errorf(herald.CodeForbidden,
			"only a portal session (a token confined to a tenant) has a portal; use GET /v1/whoami to describe other tokens")
	}
	theme := json.RawMessage("null")
	l, err := s.store.PortalLinkGet(r.Context(), portalLinkID(p.TokenID))
	switch {
	case errors.Is(err, herald.ErrNotFound):
	case err != nil:
		return err
	case l.Tenant == p.Tenant && len(l.Theme) > 0:
		theme = l.Theme
	}
	noStore(w)
	return s.reply(w, http.StatusOK, portalCurrentJSON{Tenant: p.Tenant, Theme: theme})
}

// portalSessionEnd answers DELETE /v1/portal/sessions/current, the
// portal's "End session": the bearer token revokes itself (its row is
// deleted, as DELETE /v1/tokens/{id} does), so a copy of it left in the
// browser, a proxy or a screenshot stops working on every node at once,
// and the PortalCookie is cleared.
// Only tenant-confined stored tokens qualify: every portal session is one,
// and an unconfined token (admin, --api-token) ending itself could lock
// the operator out.
func (s *server) portalSessionEnd(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	if p.TokenID == "" || p.Tenant == "" {
		return herald.Errorf(herald.CodeForbidden,
			"only a portal session (a token confined to a tenant) can end itself; revoke other tokens with DELETE /v1/tokens/{id}")
	}
	// Not found: a concurrent end won; the session is over either way.
	if err := s.store.APITokenDelete(r.Context(), p.TokenID); err != nil && !errors.Is(err, herald.ErrNotFound) {
		return err
	}
	// The browser's other tabs continued the session by its cookie: they
	// end with it.
	s.clearPortalCookie(w, r)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
