package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TokenPrefix starts every token herald generates ("hrld_" + 32 random
// bytes in base64url, ADR 0003). Tokens are opaque: authentication never
// parses them, it looks their hash up, so tokens configured with
// --api-token in any format keep working.
const TokenPrefix = "hrld_"

// maxTokenLen bounds what is hashed and looked up: generated tokens are 48
// characters; anything much longer is not a token of ours.
const maxTokenLen = 512

// NewToken returns a fresh random API token.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// HashToken returns hex(sha256(token)), the form API tokens are stored in.
// The token itself is never stored: it is random and long, so a plain hash
// is enough (no salt or slow KDF is needed, unlike for passwords).
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenAuth accepts a static token (the configured --api-token, admin) and
// tokens whose hash is stored (APITokenGet).
//
// Stored tokens are read on every request, without a cache: one
// primary-key read, so a revocation or an expiry takes effect on the very
// next request on every node (ADR 0013). The cache this replaced let a
// removed token work for up to a minute.
type TokenAuth struct {
	store  store.Store
	static [sha256.Size]byte
	// hasStatic is false when no static token is configured: an empty
	// token must never match.
	hasStatic bool
	now       func() time.Time
}

var _ Authenticator = (*TokenAuth)(nil)

// NewTokenAuth returns an Authenticator that checks tokens against static
// (when not empty, compared in constant time) and then against the tokens
// stored in s.
func NewTokenAuth(s store.Store, static string) Authenticator {
	a := &TokenAuth{store: s, now: time.Now}
	if static != "" {
		a.static, a.hasStatic = sha256.Sum256([]byte(static)), true
	}
	return a
}

// staticPrincipal is the configured --api-token's: admin, every tenant.
var staticPrincipal = &Principal{Scopes: []Scope{ScopeAdmin}}

// Authenticate implements Authenticator.
func (a *TokenAuth) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if token == "" || len(token) > maxTokenLen {
		return nil, nil
	}
	// Compare digests, not tokens: ConstantTimeCompare leaks lengths, and
	// digests all have the same one.
	sum := sha256.Sum256([]byte(token))
	if a.hasStatic && subtle.ConstantTimeCompare(sum[:], a.static[:]) == 1 {
		return staticPrincipal, nil
	}
	if a.store == nil {
		return nil, nil
	}
	hash := hex.EncodeToString(sum[:])
	t, err := a.store.APITokenGet(ctx, hash)
	if errors.Is(err, herald.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// The lookup was by hash; compare what came back anyway, in constant
	// time, so a backend that matched loosely (collation, trailing space)
	// cannot let another token in.
	if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(hash)) != 1 {
		return nil, nil
	}
	if t.ExpiresAt != nil && !a.now().Before(*t.ExpiresAt) {
		return nil, nil
	}
	p := &Principal{TokenID: t.ID, Tenant: t.Tenant, Scopes: make([]Scope, len(t.Scopes))}
	for i, s := range t.Scopes {
		p.Scopes[i] = Scope(s)
	}
	return p, nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header, or "" when there is none or it is malformed (control
// characters, inner spaces).
func bearerToken(r *http.Request) string {
	return parseBearer(r.Header.Get("Authorization"))
}

// parseBearer is bearerToken on the header's value.
func parseBearer(h string) string {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	token = strings.TrimSpace(token)
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c == 0x7f {
			return ""
		}
	}
	return token
}

// authenticated lets a request through to h only with a valid token that
// carries scope, with the principal in the request's context.
func (s *server) authenticated(scope Scope, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearerToken(r)
		// Without a bearer token, the portal's session cookie may stand
		// in (portalCookieToken says when); a bearer token always wins.
		fromCookie := false
		if token == "" {
			var err error
			if token, err = portalCookieToken(r); err != nil {
				s.writeError(w, r, err)
				return
			}
			fromCookie = token != ""
		}
		if token == "" {
			s.writeError(w, r, herald.Errorf(herald.CodeUnauthorized,
				"missing API token: send the header \"Authorization: Bearer <token>\""))
			return
		}
		p, err := s.auth.Authenticate(r.Context(), token)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if p == nil {
			if fromCookie {
				// A dead session's cookie is of no further use: drop it.
				s.clearPortalCookie(w, r)
			}
			s.writeError(w, r, herald.Errorf(herald.CodeUnauthorized, "invalid, expired or revoked API token"))
			return
		}
		if fromCookie && !isPortalSession(p) {
			s.clearPortalCookie(w, r)
			s.writeError(w, r, herald.Errorf(herald.CodeUnauthorized,
				"the portal cookie holds no portal session; send other tokens as \"Authorization: Bearer <token>\""))
			return
		}
		if scope != "" && !p.Has(scope) {
			s.writeError(w, r, herald.Errorf(herald.CodeForbidden, "this token lacks the scope %s", scope))
			return
		}
		h(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}
