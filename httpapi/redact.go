package httpapi

import (
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhq/herald"
)

// maskedCredential stands in for a receiver credential a reader may not
// see; credentialHeader is herald's one rule for which header values are
// credentials (attempts store their headers redacted by it too).
const maskedCredential = herald.MaskedCredential

var credentialHeader = herald.CredentialHeader

// receiverAsSeenBy returns sub as r's principal may see it. Receiver
// credentials — the URL's userinfo, every query value and fragment, and
// the values of credential-bearing headers — are for those who may change
// them: without subscriptions:write they are replaced by "***". sub is not
// modified; a masked copy is returned. Every answer showing a receiver
// (subscriptions, an attempt's rebuilt request) goes through here.
func receiverAsSeenBy(r *http.Request, sub *herald.Subscription) *herald.Subscription {
	if sub == nil || principalOf(r).Has(ScopeSubscriptionsWrite) {
		return sub
	}
	c := *sub
	c.URL = maskURL(sub.URL)
	if sub.Destination.Subscription != nil {
		c.Destination.Subscription = maskPushSubscription(sub.Destination.Subscription)
	}
	if len(sub.Headers) > 0 {
		c.Headers = maps.Clone(sub.Headers)
		for name, v := range c.Headers {
			if v != "" && credentialHeader(name) {
				c.Headers[name] = maskedCredential
			}
		}
	}
	return &c
}

// maskURL masks raw's userinfo, the value of every query parameter (all
// of them: a name does not say reliably which one is a token) and its
// fragment, keeping scheme, host, path and the parameter names, so a
// reader can still tell receivers apart. Stored URLs were validated on
// the way in; one that does not parse is maskedCredential whole.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return maskedCredential
	}
	hadUser := u.User != nil
	u.User = nil
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			name, value, hasValue := strings.Cut(p, "=")
			switch {
			case hasValue && value != "":
				parts[i] = name + "=" + maskedCredential
			case !hasValue && name != "":
				// ?abc123: a bare value, which may be the token itself.
				parts[i] = maskedCredential
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = maskedCredential, ""
	}
	out := u.String()
	if hadUser {
		// Set by hand: url.User would escape the stars.
		out = strings.Replace(out, "://", "://"+maskedCredential+"@", 1)
	}
	return out
}
