package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// API tokens: POST and GET /v1/tokens, DELETE /v1/tokens/{id}.

// maxTokenName bounds a token's name (characters).
const maxTokenName = 200

// tokenJSON is a token as GET /v1/tokens shows it; the token itself only
// in the create answer.
type tokenJSON struct {
	ID        string   `json:"id"`
	Token     string   `json:"token,omitempty"`
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	Tenant    *string  `json:"tenant"`
	ExpiresAt *string  `json:"expires_at"`
	CreatedAt string   `json:"created_at"`
}

func tokenView(t *store.APIToken, token string) tokenJSON {
	v := tokenJSON{ID: t.ID, Token: token, Name: t.Name, Scopes: t.Scopes, CreatedAt: timestamp(t.CreatedAt)}
	if v.Scopes == nil {
		v.Scopes = []string{}
	}
	if t.Tenant != "" {
		v.Tenant = &t.Tenant
	}
	if t.ExpiresAt != nil {
		at := timestamp(*t.ExpiresAt)
		v.ExpiresAt = &at
	}
	return v
}

// tokenCreate answers POST /v1/tokens: the token is in this answer and
// nowhere else ever again (only its hash is stored).
func (s *server) tokenCreate(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, s.smallLimit(SmallBodyBytes))
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := o.allow("name", "scopes", "tenant", "expires_at"); err != nil {
		return err
	}
	now := s.now()
	p := &store.APITokenCreateParams{ID: herald.NewID(herald.PrefixToken), Now: now}
	set, err := o.str("name", &p.Name)
	if err != nil {
		return err
	}
	if !set || p.Name == "" {
		return herald.FieldErrorf(herald.CodeMissingField, "name", "name is required")
	}
	if n := utf8.RuneCountInString(p.Name); n > maxTokenName {
		return invalid("name", "must be at most %d characters, got %d", maxTokenName, n)
	}
	// Names are shown in tables and terminals: one line, no escapes.
	if strings.IndexFunc(p.Name, unicode.IsControl) >= 0 {
		return invalid("name", "must not contain control characters")
	}
	scopes, set, err := o.stringList("scopes")
	if err != nil {
		return err
	}
	if !set || len(scopes) == 0 {
		return herald.FieldErrorf(herald.CodeMissingField, "scopes", "scopes is required: a non-empty list of scopes")
	}
	seen := map[string]bool{}
	for i, sc := range scopes {
		if !ValidScope(sc) {
			return invalid(fmt.Sprintf("scopes[%d]", i),
				"must be one of events:publish, events:read, subscriptions:read, subscriptions:write, deliveries:read, deliveries:write, admin")
		}
		if !seen[sc] {
			seen[sc] = true
			p.Scopes = append(p.Scopes, sc)
		}
	}
	set, err = o.str("tenant", &p.Tenant)
	if err != nil {
		return err
	}
	if set && !herald.ValidTenant(p.Tenant) {
		return invalid("tenant", "must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", herald.MaxTenantLen)
	}
	if p.Tenant != "" && seen[string(ScopeAdmin)] {
		// An admin token could mint itself an unconfined one.
		return invalid("scopes", "admin cannot be confined to a tenant")
	}
	var exp string
	set, err = o.str("expires_at", &exp)
	if err != nil {
		return err
	}
	if set {
		at, err := time.Parse(time.RFC3339Nano, exp)
		if err != nil {
			return invalid("expires_at", "must be an RFC 3339 time, e.g. 2027-01-01T00:00:00Z")
		}
		at = at.UTC().Truncate(time.Millisecond)
		if !at.After(now) {
			return invalid("expires_at", "must be in the future")
		}
		p.ExpiresAt = &at
	}
	token := NewToken()
	p.Hash = HashToken(token)
	if err := s.store.APITokenCreate(r.Context(), p); err != nil {
		return err
	}
	noStore(w)
	return s.reply(w, http.StatusCreated, tokenView(&store.APIToken{
		ID: p.ID, Name: p.Name, Scopes: p.Scopes, Tenant: p.Tenant, ExpiresAt: p.ExpiresAt, CreatedAt: now,
	}, token))
}

// tokenList answers GET /v1/tokens: every stored token (the configured
// --api-token is not stored and not listed), never the token itself.
func (s *server) tokenList(w http.ResponseWriter, r *http.Request) error {
	list, err := s.store.APITokenList(r.Context())
	if err != nil {
		return err
	}
	out := listJSON[tokenJSON]{Data: make([]tokenJSON, len(list))}
	for i, t := range list {
		out.Data[i] = tokenView(t, "")
	}
	return s.reply(w, http.StatusOK, out)
}

// tokenDelete answers DELETE /v1/tokens/{id}: the token stops working at
// the next request on every node (authentication reads the store).
func (s *server) tokenDelete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if id == principalOf(r).TokenID {
		// Revoking the generated admin token with itself would lock the
		// operator out; make another admin token first.
		return herald.Conflictf("a token cannot revoke itself; revoke it with another admin token")
	}
	if err := s.store.APITokenDelete(r.Context(), id); err != nil {
		return notFound(err, "token", id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
