package openapitest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/openapi/openapitest"
)

// TestCheck covers the rule of the package comment with hand-made
// exchanges (httpapi's tests cover real ones).
func TestCheck(t *testing.T) {
	t.Parallel()
	v, err := openapitest.Default()
	require.NoError(t, err)
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	const (
		okStats  = `{"tiers":[],"dead":0,"delivered_total":0,"throttled":0,"skipped":0,"superseded":0}`
		notFound = `{"error":{"code":"not_found","message":"no route"}}`
		badInput = `{"error":{"code":"invalid_field","message":"type must be a string","field":"type"}}`
	)
	for _, tc := range []struct {
		name, method, path, reqBody string
		token                       bool
		status                      int
		body                        string
		wantErr                     string
	}{
		{"valid exchange", "GET", "/v1/stats", "", true, 200, okStats, ""},
		{"extra field in the answer", "GET", "/v1/stats", "", true, 200, strings.Replace(okStats, `"dead"`, `"dead2":1,"dead"`, 1), "does not match"},
		{"undocumented status", "GET", "/v1/stats", "", true, 418, notFound, "does not match"},
		{"refused request refused", "POST", "/v1/events", `{"type":1}`, true, 400, badInput, ""},
		{"refused request accepted", "POST", "/v1/events", `{"type":1}`, true, 202, `{"id":"e","duplicate":false,"deliveries":0}`, "refuses the request"},
		{"no token accepted", "GET", "/v1/stats", "", false, 200, okStats, "refuses the request"},
		{"unknown route 404", "GET", "/nowhere", "", false, 404, notFound, ""},
		{"unknown route 200", "GET", "/nowhere", "", false, 200, `{}`, "no documented operation"},
		{"unknown route, wrong body", "GET", "/nowhere", "", false, 404, `{"error":"x"}`, "matches no error schema"},
		{"unknown /v1 route 401", "GET", "/v1/nope", "", false, 401, `{"error":{"code":"unauthorized","message":"missing API token"}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var body []byte
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.reqBody != "" {
				body = []byte(tc.reqBody)
				req.Header.Set("Content-Type", "application/json")
			}
			if tc.token {
				req.Header.Set("Authorization", "Bearer t")
			}
			err := v.Check(req, body, tc.status, jsonHeader, []byte(tc.body))
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.wantErr)
			}
		})
	}
}

func TestCheckWebhook(t *testing.T) {
	t.Parallel()
	v, err := openapitest.Default()
	require.NoError(t, err)
	good := http.Header{
		"Content-Type":           {"application/json"},
		"Webhook-Id":             {"dlv_1"},
		"Webhook-Timestamp":      {"1700000000"},
		"Webhook-Signature":      {"v1,c2ln v1,b3RoZXI="},
		"Herald-Attempt":         {"1"},
		"Herald-Event-Type":      {"order.created"},
		"Herald-Subscription-Id": {"sub_1"},
	}
	body := []byte(`{"id":"e1","type":"order.created","timestamp":"2025-01-02T15:04:05Z","data":{"n":1}}`)
	req := httptest.NewRequest(http.MethodPost, "/hook", nil)
	req.Header = good.Clone()
	require.NoError(t, v.CheckWebhook(req, body))

	req.Header.Del("Webhook-Signature")
	require.ErrorContains(t, v.CheckWebhook(req, body), "webhook-signature")
	req.Header = good.Clone()
	require.Error(t, v.CheckWebhook(req, []byte(`{"id":"e1","type":"t","data":1}`)), "no timestamp")
}
