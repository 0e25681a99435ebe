package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

func TestSubscriptionCRUD(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)

		// Create with defaults: the answer has every field and the secret.
		res := b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://example.com/a"})
		require.Equal(t, "no-store", res.header.Get("Cache-Control"))
		created := ok[obj](t, res, http.StatusCreated)
		id, _ := created["id"].(string)
		require.Regexp(t, `^sub_[0-9a-z]{26}$`, id)
		require.Equal(t, "/v1/subscriptions/"+id, res.header.Get("Location"))
		require.NoError(t, webhook.ValidSecret(created["secret"].(string)))
		defaults := obj{
			"url": "https://example.com/a", "method": "POST", "event_types": []any{}, "filter": nil,
			"headers": obj{}, "ordering": "none", "key_interval_ms": float64(0), "rate_limit": nil,
			"max_in_flight": float64(0), "timeout_ms": float64(10000), "description": "", "metadata": obj{},
			"state": "enabled", "disabled_reason": "",
		}
		for k, v := range defaults {
			require.Equal(t, v, created[k], "field %s", k)
		}
		require.NotEmpty(t, created["created_at"])
		require.NotEmpty(t, created["updated_at"])

		// Create with everything set.
		full := b.createSub(t, obj{
			"url": "http://hooks.example.com:8080/b?x=1", "method": "put", "event_types": []string{"bundle.*", "user.created"},
			"filter": obj{"cel": "data.size > 10"}, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
			"headers": obj{"x-tenant": "a", "Authorization": "Bearer abc"}, "ordering": "latest", "key_interval_ms": 1000,
			"rate_limit": obj{"max": 10, "per_seconds": 1}, "max_in_flight": 4, "timeout_ms": 2500,
			"description": "bundles", "metadata": obj{"team": "search", "n": 12345678901234},
		})
		require.Equal(t, "PUT", full.Method)
		require.Equal(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", full.Secret)
		require.Equal(t, &herald.Filter{CEL: "data.size > 10"}, full.Filter)
		require.Equal(t, &herald.RateLimit{Max: 10, PerSeconds: 1}, full.RateLimit)
		require.Equal(t, map[string]string{"x-tenant": "a", "Authorization": "Bearer abc"}, full.Headers)
		require.JSONEq(t, `{"team":"search","n":12345678901234}`, string(full.Metadata))

		// Get never shows the secret.
		got := ok[obj](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+full.ID, nil), http.StatusOK)
		require.NotContains(t, got, "secret")
		require.Equal(t, "latest", got["ordering"])

		// List pages in id order with an opaque cursor.
		page1 := ok[listJSON[obj]](t, b.do(t, http.MethodGet, "/v1/subscriptions?limit=1", nil), http.StatusOK)
		require.Len(t, page1.Data, 1)
		require.Equal(t, id, page1.Data[0]["id"])
		require.NotContains(t, page1.Data[0], "secret")
		require.NotNil(t, page1.NextCursor)
		page2 := ok[listJSON[obj]](t, b.do(t, http.MethodGet, "/v1/subscriptions?limit=1&cursor="+*page1.NextCursor, nil), http.StatusOK)
		require.Len(t, page2.Data, 1)
		require.Equal(t, full.ID, page2.Data[0]["id"])
		all := ok[listJSON[obj]](t, b.do(t, http.MethodGet, "/v1/subscriptions", nil), http.StatusOK)
		require.Len(t, all.Data, 2)
		require.Nil(t, all.NextCursor)

		// PATCH is a merge patch: untouched fields stay, null clears, nested
		// objects merge.
		patched := ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID, obj{
			"description": "renamed",
			"rate_limit":  obj{"max": 5},
			"headers":     obj{"x-tenant": nil, "x-new": "1"},
			"filter":      obj{"jmespath": "data.size > `10`"},
			"metadata":    nil,
		}), http.StatusOK)
		require.Equal(t, "renamed", patched.Description)
		require.Equal(t, &herald.RateLimit{Max: 5, PerSeconds: 1}, patched.RateLimit)
		require.Equal(t, map[string]string{"Authorization": "Bearer abc", "x-new": "1"}, patched.Headers)
		require.Equal(t, &herald.Filter{JMESPath: "data.size > `10`"}, patched.Filter)
		require.JSONEq(t, `{}`, string(patched.Metadata))
		require.Equal(t, "PUT", patched.Method)
		require.Equal(t, []string{"bundle.*", "user.created"}, patched.EventTypes)
		require.Equal(t, int64(2500), patched.TimeoutMS)
		require.Empty(t, patched.Secret)

		// null resets to the default; the result is validated as a whole.
		patched = ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID,
			obj{"rate_limit": nil, "filter": nil, "timeout_ms": nil, "method": nil}), http.StatusOK)
		require.Nil(t, patched.RateLimit)
		require.Nil(t, patched.Filter)
		require.Equal(t, int64(10000), patched.TimeoutMS)
		require.Equal(t, "POST", patched.Method)
		requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID, obj{"url": nil}),
			http.StatusBadRequest, herald.CodeMissingField, "url")
		requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID, obj{"rate_limit": obj{"max": 1, "per_seconds": 0}}),
			http.StatusBadRequest, herald.CodeInvalidField, "rate_limit.per_seconds")
		requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID, obj{"bogus": 1}),
			http.StatusBadRequest, herald.CodeUnknownField, "bogus")
		for _, f := range []string{"id", "created_at", "secret"} {
			requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID, obj{f: "x"}),
				http.StatusBadRequest, herald.CodeInvalidField, f)
		}

		// Disable and re-enable.
		patched = ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID, obj{"state": "disabled"}), http.StatusOK)
		require.Equal(t, herald.SubscriptionDisabled, patched.State)
		require.Equal(t, "disabled by API", patched.DisabledReason)
		patched = ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID, obj{"description": "x"}), http.StatusOK)
		require.Equal(t, herald.SubscriptionDisabled, patched.State, "a patch without state keeps it")
		patched = ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID, obj{"state": "enabled"}), http.StatusOK)
		require.Equal(t, herald.SubscriptionEnabled, patched.State)
		require.Empty(t, patched.DisabledReason)

		// Delete; then it is gone.
		res = b.do(t, http.MethodDelete, "/v1/subscriptions/"+full.ID, nil)
		require.Equal(t, http.StatusNoContent, res.code)
		requireError(t, b.do(t, http.MethodGet, "/v1/subscriptions/"+full.ID, nil), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodDelete, "/v1/subscriptions/"+full.ID, nil), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+full.ID, obj{"description": "x"}), http.StatusNotFound, herald.CodeNotFound, "")
	})
}

func TestSubscriptionSecretRotate(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		const first = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		sub := b.createSub(t, obj{"secret": first})

		res := b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID+"/secret", nil)
		require.Equal(t, "no-store", res.header.Get("Cache-Control"))
		sec := ok[secretsJSON](t, res, http.StatusOK)
		require.Equal(t, first, sec.Secret)
		require.Len(t, sec.Secrets, 1)
		require.Nil(t, sec.Secrets[0].ExpiresAt)

		// Rotate without a body: a generated secret; the old one keeps
		// signing for the default grace.
		rot := ok[secretsJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/secret/rotate", nil), http.StatusOK)
		require.NotEqual(t, first, rot.Secret)
		require.NoError(t, webhook.ValidSecret(rot.Secret))
		sec = ok[secretsJSON](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID+"/secret", nil), http.StatusOK)
		require.Equal(t, rot.Secret, sec.Secret)
		require.Len(t, sec.Secrets, 2)
		require.Equal(t, first, sec.Secrets[1].Secret)
		require.NotNil(t, sec.Secrets[1].ExpiresAt)

		// Rotate to a given secret with no grace: only it is left.
		const third = "whsec_dGhpcmQtc2VjcmV0LXRoaXJkLXNlY3JldC0xMjM0"
		rot = ok[secretsJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/secret/rotate",
			obj{"secret": third, "grace_period_s": 0}), http.StatusOK)
		require.Equal(t, third, rot.Secret)
		sec = ok[secretsJSON](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID+"/secret", nil), http.StatusOK)
		require.Equal(t, third, sec.Secret)
		require.Len(t, sec.Secrets, 1)

		// Neither GET nor list shows it.
		got := ok[obj](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID, nil), http.StatusOK)
		require.NotContains(t, got, "secret")

		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/secret/rotate", obj{"secret": "whsec_c2hvcnQ="}),
			http.StatusBadRequest, herald.CodeInvalidField, "secret")
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/secret/rotate", obj{"grace_period_s": -1}),
			http.StatusBadRequest, herald.CodeInvalidField, "grace_period_s")
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/secret/rotate", obj{"grace": 1}),
			http.StatusBadRequest, herald.CodeUnknownField, "grace")
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions/sub_nope/secret/rotate", nil),
			http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/subscriptions/sub_nope/secret", nil),
			http.StatusNotFound, herald.CodeNotFound, "")
	})
}

func TestMergePatch(t *testing.T) {
	t.Parallel()
	// RFC 7396 appendix A examples (a selection).
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	} {
		var target, patch any
		require.NoError(t, json.Unmarshal([]byte(tc.target), &target))
		require.NoError(t, json.Unmarshal([]byte(tc.patch), &patch))
		got, err := json.Marshal(mergePatch(target, patch))
		require.NoError(t, err)
		require.JSONEq(t, tc.want, string(got), "%s + %s", tc.target, tc.patch)
	}
}
