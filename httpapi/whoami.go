package httpapi

import (
	"net/http"
	"slices"
)

// ScopeAnyToken is what GET /v1/whoami declares: any valid token reaches
// it, whatever its scopes, because it only describes that token. No token
// carries it: it is not in AllScopes.
const ScopeAnyToken Scope = "any-token"

// whoamiResponse is the body of GET /v1/whoami.
type whoamiResponse struct {
	// TokenID is "" for the configured --api-token (it has no stored row).
	TokenID string   `json:"token_id"`
	Scopes  []string `json:"scopes"`
	// Tenant is "" for a token that is not confined to a tenant.
	Tenant string `json:"tenant"`
	Admin  bool   `json:"admin"`
}

// v1AnyToken mounts a /v1 route any valid token reaches; it declares
// ScopeAnyToken.
func (s *server) v1AnyToken(pattern string, h handlerFunc) {
	s.scopes[pattern] = ScopeAnyToken
	s.handle(pattern, s.authenticated("", func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}))
}

// whoami answers GET /v1/whoami: the calling token's scopes and tenant, so
// that the dashboard shows what the token allows (a read-only token sees
// no write buttons, a tenant token its tenant) and nothing else.
func (s *server) whoami(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	scopes := make([]string, 0, len(p.Scopes))
	for _, sc := range p.Scopes {
		scopes = append(scopes, string(sc))
	}
	slices.Sort(scopes)
	writeJSON(w, http.StatusOK, whoamiResponse{
		TokenID: p.TokenID, Scopes: scopes, Tenant: p.Tenant, Admin: p.Has(ScopeAdmin),
	}, s.logger)
	return nil
}
