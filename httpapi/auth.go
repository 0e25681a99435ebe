package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Token cache bounds. Only positive answers are cached, so a newly stored
// token works at once; a removed token keeps working for at most
// tokenCacheTTL.
const (
	tokenCacheTTL  = time.Minute
	tokenCacheSize = 256
)

// HashToken returns hex(sha256(token)), the form API tokens are stored in.
// The token itself is never stored: it is random and long, so a plain hash
// is enough (no salt or slow KDF is needed, unlike for passwords).
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenAuth accepts a static token (the configured --api-token) and tokens
// whose hash is stored (APITokenExists).
type TokenAuth struct {
	store  store.Store
	static [sha256.Size]byte
	// hasStatic is false when no static token is configured: an empty
	// token must never match.
	hasStatic bool
	now       func() time.Time

	mu    sync.Mutex
	cache map[string]time.Time // token hash -> cached until
}

var _ Authenticator = (*TokenAuth)(nil)

// NewTokenAuth returns an Authenticator that checks tokens against static
// (when not empty, compared in constant time) and then against the hashes
// in s, caching positive answers for a minute.
func NewTokenAuth(s store.Store, static string) Authenticator {
	a := &TokenAuth{store: s, now: time.Now, cache: make(map[string]time.Time)}
	if static != "" {
		a.static, a.hasStatic = sha256.Sum256([]byte(static)), true
	}
	return a
}

// Authenticate implements Authenticator.
func (a *TokenAuth) Authenticate(ctx context.Context, token string) (bool, error) {
	if token == "" {
		return false, nil
	}
	// Compare digests, not tokens: ConstantTimeCompare leaks lengths, and
	// digests all have the same one.
	sum := sha256.Sum256([]byte(token))
	if a.hasStatic && subtle.ConstantTimeCompare(sum[:], a.static[:]) == 1 {
		return true, nil
	}
	hash := hex.EncodeToString(sum[:])
	now := a.now()
	a.mu.Lock()
	until, ok := a.cache[hash]
	a.mu.Unlock()
	if ok && now.Before(until) {
		return true, nil
	}
	if a.store == nil {
		return false, nil
	}
	exists, err := a.store.APITokenExists(ctx, hash)
	if err != nil || !exists {
		return false, err
	}
	a.mu.Lock()
	if len(a.cache) >= tokenCacheSize {
		// Few tokens exist in practice; when a flood of distinct valid
		// tokens fills the cache, starting over is simpler than LRU and
		// costs one store read per token.
		clear(a.cache)
	}
	a.cache[hash] = now.Add(tokenCacheTTL)
	a.mu.Unlock()
	return true, nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header, or "" when there is none.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// authenticated lets a request through to h only with a valid token.
func (s *server) authenticated(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearerToken(r)
		if token == "" {
			s.writeError(w, r, herald.Errorf(herald.CodeUnauthorized,
				"missing API token: send the header \"Authorization: Bearer <token>\""))
			return
		}
		ok, err := s.auth.Authenticate(r.Context(), token)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if !ok {
			s.writeError(w, r, herald.Errorf(herald.CodeUnauthorized, "invalid API token"))
			return
		}
		h(w, r)
	})
}
