package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
)

// TestReadOnlyScopesSeeMaskedCredentials: a receiver's credentials (URL
// userinfo, query values, credential-bearing headers) are shown only to
// tokens with subscriptions:write, in subscriptions and in the request an
// attempt sent alike.
func TestReadOnlyScopesSeeMaskedCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t, testdb.SQLite(t))
	const rawURL = "https://user:hunter2@hooks.example.com/in/path?token=tok123&page=2&flag#frag"
	const maskedURL = "https://***@hooks.example.com/in/path?token=***&page=***&***#***"
	headers := obj{
		"Authorization": "Bearer s3cret", "X-Api-Key": "k3y", "Cookie": "sid=abc", "X-Auth-Token": "t0k", "X-Webhook-Secret": "sh",
		"X-Tenant": "acme", "Accept-Language": "en",
	}
	sub := b.createSub(t, obj{"url": rawURL, "headers": headers})
	require.Equal(t, rawURL, sub.URL, "the creator sees what it sent")
	pub := b.publish(t, obj{"type": "a.b"})
	d := b.deliveriesOf(t, pub.ID)
	require.Len(t, d, 1)
	b.killDeliveries(t, []string{d[0].ID}, time.Now().UTC())

	readOnly := withToken(b.createToken(t, obj{"name": "viewer", "scopes": []string{"subscriptions:read", "deliveries:read"}}).Token)
	writer := withToken(b.createToken(t, obj{"name": "editor", "scopes": []string{"subscriptions:read", "subscriptions:write", "deliveries:read"}}).Token)
	wantMasked := map[string]string{
		"Authorization": "***", "X-Api-Key": "***", "Cookie": "***",
		"X-Auth-Token": "***", "X-Webhook-Secret": "***", "X-Tenant": "acme", "Accept-Language": "en",
	}
	wantClear := map[string]string{}
	for k, v := range headers {
		wantClear[k] = v.(string)
	}

	for _, tc := range []struct {
		name    string
		as      reqOption
		url     string
		headers map[string]string
	}{
		{"read-only", readOnly, maskedURL, wantMasked},
		{"write", writer, rawURL, wantClear},
		{"admin", withToken(testToken), rawURL, wantClear},
	} {
		got := ok[subscriptionJSON](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID, nil, tc.as), http.StatusOK)
		require.Equal(t, tc.url, got.URL, tc.name)
		require.Equal(t, tc.headers, got.Headers, tc.name)

		list := ok[listJSON[subscriptionJSON]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil, tc.as), http.StatusOK)
		require.Len(t, list.Data, 1)
		require.Equal(t, tc.url, list.Data[0].URL, tc.name)
		require.Equal(t, tc.headers, list.Data[0].Headers, tc.name)

		dl := ok[deliveryDetailJSON](t, b.do(t, http.MethodGet, "/v1/deliveries/"+d[0].ID, nil, tc.as), http.StatusOK)
		require.Len(t, *dl.Attempts, 1)
		req := (*dl.Attempts)[0].Request
		require.NotNil(t, req)
		require.Equal(t, tc.url, req.URL, tc.name)
		for name, v := range tc.headers {
			require.Equal(t, v, req.Headers[strings.ToLower(name)], "%s: %s", tc.name, name)
		}
		require.Equal(t, maskedSignature, req.Headers["webhook-signature"], "herald's own headers are unchanged")
		require.Equal(t, sub.ID, req.Headers["herald-subscription-id"])
	}

	// What the stored subscription holds is untouched by a masked read.
	got := ok[subscriptionJSON](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID, nil), http.StatusOK)
	require.Equal(t, rawURL, got.URL)
}

func TestMaskURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://example.com/hook":                   "https://example.com/hook",
		"https://u@example.com/":                     "https://***@example.com/",
		"http://u:p@example.com:8080/a?":             "http://***@example.com:8080/a?",
		"https://example.com/a?api_key=x&sig=y&z=":   "https://example.com/a?api_key=***&sig=***&z=",
		"https://example.com/a?x=1#access_token=abc": "https://example.com/a?x=***#***",
		"https://example.com/a%2Fb?q=a%20b":          "https://example.com/a%2Fb?q=***",
		"://bad":                                     "***",
	} {
		require.Equal(t, want, maskURL(raw), raw)
	}
	for name, want := range map[string]bool{
		"Authorization": true, "proxy-authorization": true, "X-API-Key": true, "Cookie": true,
		"X-Access-Token": true, "X-Client-Secret": true, "X-Password": true, "X-Session": true,
		"X-Tenant": false, "Accept": false, "X-Request-Source": false,
	} {
		require.Equal(t, want, credentialHeader(name), name)
	}
}
