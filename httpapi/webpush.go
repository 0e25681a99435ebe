package httpapi

import (
	"context"
	"net/http"

	"github.com/heraldhq/herald"
)

// ScopePublic is what a route declares that needs no token at all: it
// serves what every caller may know (GET /v1/webpush/vapid-public-key, the
// key every subscribing page is given). No token carries it: it is not in
// AllScopes.
const ScopePublic Scope = "public"

// WebPushKeys gives the VAPID public key of herald's Web Push destinations
// (cmd/herald reads it from the store).
type WebPushKeys interface {
	// PublicKey is the uncompressed P-256 point, base64url without
	// padding: a page's applicationServerKey.
	PublicKey(ctx context.Context) (string, error)
}

// v1Public mounts a route that takes no token.
func (s *server) v1Public(pattern string, h handlerFunc) {
	s.scopes[pattern] = ScopePublic
	s.handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}))
}

// webPushKey answers GET /v1/webpush/vapid-public-key.
func (s *server) webPushKey(w http.ResponseWriter, r *http.Request) error {
	key, err := s.cfg.WebPush.PublicKey(r.Context())
	if err != nil {
		s.logger.Error("reading the VAPID key", "err", err)
		return herald.Errorf(herald.CodeStoreUnavailable, "the VAPID key is not available")
	}
	return s.reply(w, http.StatusOK, map[string]string{"public_key": key})
}
