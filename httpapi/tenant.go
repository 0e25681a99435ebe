package httpapi

import (
	"net/http"
	"net/url"

	"github.com/heraldhq/herald"
)

// Tenant confinement, shared by every handler: what a tenant-confined
// token may list, see and write.

// tenantFilter is the tenant a listing is confined to: the caller's own
// tenant for a tenant-confined token (a ?tenant= naming another one is
// forbidden, so a typo is not mistaken for an empty tenant), else
// ?tenant= ("" lists every tenant).
func tenantFilter(r *http.Request, q url.Values) (string, error) {
	t := q.Get("tenant")
	if t != "" && !herald.ValidTenant(t) {
		return "", herald.FieldErrorf(herald.CodeInvalidField, "tenant",
			"tenant must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", herald.MaxTenantLen)
	}
	if own := principalOf(r).Tenant; own != "" {
		if t != "" && t != own {
			return "", herald.Errorf(herald.CodeForbidden, "this token is confined to tenant %s", quote(own))
		}
		return own, nil
	}
	return t, nil
}

// visible reports whether the caller may see an object of tenant: always
// for an unconfined token, only its own tenant's objects otherwise.
// Handlers answer not_found for an invisible object, as if it did not
// exist, so a tenant cannot learn another tenant's ids.
func visible(r *http.Request, tenant string) bool {
	own := principalOf(r).Tenant
	return own == "" || own == tenant
}

// errOtherTenant answers a confined token naming another tenant outright
// (in a body or ?tenant=): 403, since the caller already knows the name.
func errOtherTenant(own string) error {
	return herald.Errorf(herald.CodeForbidden, "this token is confined to tenant %s", quote(own))
}

// stampTenant gives ev the caller's tenant when the caller is confined to
// one; an event naming another tenant is forbidden.
func stampTenant(r *http.Request, ev *herald.Event) error {
	own := principalOf(r).Tenant
	if own == "" {
		return nil
	}
	if ev.Tenant != "" && ev.Tenant != own {
		return errOtherTenant(own)
	}
	ev.Tenant = own
	return nil
}

// visibleSubscription returns subscription id if it exists and the caller
// may see it, else not_found.
func (s *server) visibleSubscription(r *http.Request, id string) (*herald.Subscription, error) {
	sub, err := s.store.SubscriptionGet(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "subscription", id)
	}
	if !visible(r, sub.Tenant) {
		return nil, notFound(herald.ErrNotFound, "subscription", id)
	}
	return sub, nil
}

// confineSubscription is visibleSubscription for handlers that do not need
// the subscription: an unconfined caller costs no read.
func (s *server) confineSubscription(r *http.Request, id string) error {
	if principalOf(r).Tenant == "" {
		return nil
	}
	_, err := s.visibleSubscription(r, id)
	return err
}

// confineDelivery answers not_found unless the caller may see delivery id:
// a confined caller only its own tenant's subscriptions' deliveries (not
// those an all-tenants subscription received from its events).
func (s *server) confineDelivery(r *http.Request, id string) error {
	own := principalOf(r).Tenant
	if own == "" {
		return nil
	}
	res, err := s.store.DeliveryGet(r.Context(), id)
	if err != nil {
		return notFound(err, "delivery", id)
	}
	sub, err := s.store.SubscriptionGet(r.Context(), res.Delivery.SubscriptionID)
	if err != nil || sub.Tenant != own {
		return notFound(herald.ErrNotFound, "delivery", id)
	}
	return nil
}
