package httpapi

import (
	"context"
	"net/http"
	"slices"
)

// Scope is a permission an API token carries (ADR 0013). Every /v1 route
// declares the one it needs where it is mounted (server.routes).
type Scope string

// Scopes. ScopeAdmin implies every other.
const (
	ScopeEventsPublish      Scope = "events:publish"
	ScopeEventsRead         Scope = "events:read"
	ScopeSubscriptionsRead  Scope = "subscriptions:read"
	ScopeSubscriptionsWrite Scope = "subscriptions:write"
	ScopeDeliveriesRead     Scope = "deliveries:read"
	ScopeDeliveriesWrite    Scope = "deliveries:write"
	ScopeAdmin              Scope = "admin"
)

// AllScopes lists every scope, in the order docs show them.
var AllScopes = []Scope{
	ScopeEventsPublish, ScopeEventsRead, ScopeSubscriptionsRead, ScopeSubscriptionsWrite,
	ScopeDeliveriesRead, ScopeDeliveriesWrite, ScopeAdmin,
}

// ScopePortalLink is what a route declares that takes no bearer token
// because the request carries a portal link instead (POST
// /v1/portal/sessions). No token carries it: it is not in AllScopes.
const ScopePortalLink Scope = "portal-link"

// ScopePortalSession is what GET and DELETE /v1/portal/sessions/current declare:
// any stored token confined to a tenant (every portal session is) may end
// itself there (or read its portal), whatever its scopes. It is not in
// AllScopes either.
const ScopePortalSession Scope = "portal-session"

// ValidRouteScope reports whether a route may declare s: a token scope,
// ScopePortalLink, ScopePortalSession, ScopeAnyToken or ScopePublic.
func ValidRouteScope(s string) bool {
	return ValidScope(s) || Scope(s) == ScopePortalLink || Scope(s) == ScopePortalSession ||
		Scope(s) == ScopeAnyToken || Scope(s) == ScopePublic
}

// ValidScope reports whether s is a known scope.
func ValidScope(s string) bool { return slices.Contains(AllScopes, Scope(s)) }

// Principal is who an authenticated request acts as.
type Principal struct {
	// TokenID is the stored token's id; "" for the configured --api-token.
	TokenID string
	Scopes  []Scope
	// Tenant, when set, confines every request to that tenant's data.
	Tenant string
}

// Has reports whether p carries scope s (admin carries every scope).
func (p *Principal) Has(s Scope) bool {
	return slices.Contains(p.Scopes, ScopeAdmin) || slices.Contains(p.Scopes, s)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of an authenticated request's
// context, or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// noPrincipal confines nothing and carries no scope; principalOf returns
// it for a context without a principal, which only unauthenticated code
// paths have.
var noPrincipal = &Principal{}

func principalOf(r *http.Request) *Principal {
	if p := PrincipalFrom(r.Context()); p != nil {
		return p
	}
	return noPrincipal
}
