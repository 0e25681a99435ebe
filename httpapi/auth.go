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

	lru "github.com/hashicorp/golang-lru/v2"

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
// Stored tokens are read on every request (Authenticate): one primary-key
// read, so a revocation or an expiry takes effect on the very next request
// on every node (ADR 0013). Publishing is the exception (ADR 0035):
// AuthenticateCached answers from the tokens this node read recently, and
// the publish's insert confirms the token in its own transaction
// (store.EventInsertManyParams.Tokens), which keeps the same rule without
// the read.
type TokenAuth struct {
	store  store.Store
	static [sha256.Size]byte
	// hasStatic is false when no static token is configured: an empty
	// token must never match.
	hasStatic bool
	now       func() time.Time
	// cache holds the principals of tokens read and found valid, by hash
	// (tokenCacheSize at most, least recently used out first). Only
	// AuthenticateCached answers from it.
	cache *lru.Cache[string, *cachedToken]
}

// tokenCacheSize bounds the tokens a node remembers for publishing: 4,096
// principals, well under a MiB. Only tokens found valid are kept, so
// guessed tokens cannot fill it.
const tokenCacheSize = 4096

// cachedToken is a token found valid by a read: its principal, what the
// insert confirms, and its expiry (fixed at creation), checked here.
type cachedToken struct {
	p         *Principal
	check     store.TokenCheck
	expiresAt *time.Time
}

var _ Authenticator = (*TokenAuth)(nil)

// NewTokenAuth returns an Authenticator that checks tokens against static
// (when not empty, compared in constant time) and then against the tokens
// stored in s.
func NewTokenAuth(s store.Store, static string) Authenticator {
	cache, _ := lru.New[string, *cachedToken](tokenCacheSize) // errs only on a size <= 0
	a := &TokenAuth{store: s, now: time.Now, cache: cache}
	if static != "" {
		a.static, a.hasStatic = sha256.Sum256([]byte(static)), true
	}
	return a
}

// staticPrincipal is the configured --api-token's: admin, every tenant.
var staticPrincipal = &Principal{Scopes: []Scope{ScopeAdmin}}

// Authenticate implements Authenticator.
func (a *TokenAuth) Authenticate(ctx context.Context, token string) (*Principal, error) {
	hash, p, decided := a.digest(token)
	if decided {
		return p, nil
	}
	return a.read(ctx, hash)
}

// digest decides what needs no store: an empty or overlong token (nil),
// the static token (admin), no store (nil). Otherwise decided is false and
// hash is the token's stored form (HashToken).
func (a *TokenAuth) digest(token string) (hash string, p *Principal, decided bool) {
	if token == "" || len(token) > maxTokenLen {
		return "", nil, true
	}
	// Compare digests, not tokens: ConstantTimeCompare leaks lengths, and
	// digests all have the same one.
	sum := sha256.Sum256([]byte(token))
	if a.hasStatic && subtle.ConstantTimeCompare(sum[:], a.static[:]) == 1 {
		return "", staticPrincipal, true
	}
	if a.store == nil {
		return "", nil, true
	}
	return hex.EncodeToString(sum[:]), nil, false
}

// read looks the token with this hash up, remembers it when valid and
// forgets it otherwise.
func (a *TokenAuth) read(ctx context.Context, hash string) (*Principal, error) {
	t, err := a.store.APITokenGet(ctx, hash)
	if errors.Is(err, herald.ErrNotFound) {
		a.cache.Remove(hash)
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
		a.cache.Remove(hash)
		return nil, nil
	}
	p := &Principal{TokenID: t.ID, Tenant: t.Tenant, Scopes: make([]Scope, len(t.Scopes))}
	for i, s := range t.Scopes {
		p.Scopes[i] = Scope(s)
	}
	a.cache.Add(hash, &cachedToken{p: p, check: store.TokenCheck{Hash: hash, ID: t.ID}, expiresAt: t.ExpiresAt})
	return p, nil
}

// AuthenticateCached is Authenticate for a route whose write confirms the
// token itself (publishing, v1Confirmed): a token this node found valid
// before is taken without a read, and check names what the write must
// confirm (store.WithTokenCheck). A token not in the cache is read as by
// Authenticate, and check is nil. An expired token fails here as there.
func (a *TokenAuth) AuthenticateCached(ctx context.Context, token string) (p *Principal, check *store.TokenCheck, err error) {
	hash, p, decided := a.digest(token)
	if decided {
		return p, nil, nil
	}
	if c, ok := a.cache.Get(hash); ok {
		if c.expiresAt != nil && !a.now().Before(*c.expiresAt) {
			a.cache.Remove(hash)
			return nil, nil, nil
		}
		return c.p, &c.check, nil
	}
	p, err = a.read(ctx, hash)
	return p, nil, err
}

// Confirm reads a token AuthenticateCached took from the cache, for a
// request that ends without the write that would have confirmed it (an
// error, a batch with nothing to store). It reports whether the token is
// still stored, and forgets it when not.
func (a *TokenAuth) Confirm(ctx context.Context, check store.TokenCheck) (bool, error) {
	p, err := a.read(ctx, check.Hash)
	if err != nil {
		return false, err
	}
	return p != nil && p.TokenID == check.ID, nil
}

// Forget drops a token from the cache (its insert found it gone).
func (a *TokenAuth) Forget(check store.TokenCheck) {
	a.cache.Remove(check.Hash)
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

// cachedAuthenticator is an Authenticator that can also answer from the
// tokens it read recently, for routes whose write confirms the token
// (v1Confirmed). TokenAuth is one.
type cachedAuthenticator interface {
	AuthenticateCached(ctx context.Context, token string) (*Principal, *store.TokenCheck, error)
	Confirm(ctx context.Context, check store.TokenCheck) (bool, error)
	Forget(check store.TokenCheck)
}

// confirmToken settles the token of a request authenticated from the cache
// (v1Confirmed) that ended without the insert that confirms it — with err,
// or with nil when it had nothing to store: store.ErrTokenGone when the
// token is gone (whatever err was, so a revoked token learns nothing from
// the request), else err. It does nothing for a request whose token was
// read.
func (s *server) confirmToken(r *http.Request, err error) error {
	check, ok := store.TokenCheckFrom(r.Context())
	ca, cached := s.auth.(cachedAuthenticator)
	if !ok || !cached {
		return err
	}
	if errors.Is(err, store.ErrTokenGone) {
		ca.Forget(check)
		return err
	}
	valid, cerr := ca.Confirm(r.Context(), check)
	switch {
	case cerr != nil:
		return cerr
	case !valid:
		return store.ErrTokenGone
	}
	return err
}

// authenticated lets a request through to h only with a valid token that
// carries scope, with the principal in the request's context.
func (s *server) authenticated(scope Scope, h http.HandlerFunc) http.Handler {
	return s.authenticatedAs(scope, false, h)
}

// authenticatedAs is authenticated; with cached, a token the node found
// valid before passes without a read, and the request's context carries
// what its write must confirm (store.WithTokenCheck; v1Confirmed).
func (s *server) authenticatedAs(scope Scope, cached bool, h http.HandlerFunc) http.Handler {
	ca, canCache := s.auth.(cachedAuthenticator)
	cached = cached && canCache
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
		var (
			p     *Principal
			check *store.TokenCheck
			err   error
		)
		if cached {
			p, check, err = ca.AuthenticateCached(r.Context(), token)
			if err == nil && check != nil && ((fromCookie && !isPortalSession(p)) || (scope != "" && !p.Has(scope))) {
				// About to be refused: read the token first, so a revoked
				// one is told so and nothing else.
				check = nil
				p, err = s.auth.Authenticate(r.Context(), token)
			}
		} else {
			p, err = s.auth.Authenticate(r.Context(), token)
		}
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
		ctx := WithPrincipal(r.Context(), p)
		if check != nil {
			ctx = store.WithTokenCheck(ctx, *check)
		}
		h(w, r.WithContext(ctx))
	})
}
