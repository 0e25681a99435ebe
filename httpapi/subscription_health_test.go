package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// TestSubscriptionHealth: auto_disable is set, turned off with null and
// put back with "default"; GET shows the health (streak, failing since,
// 24-hour success rate, the rule in force) and re-enabling a subscription
// auto-disabled for failing resets its streak.
func TestSubscriptionHealth(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		get := func(id string) obj {
			t.Helper()
			return ok[obj](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+id, nil), http.StatusOK)
		}
		patch := func(id string, body any) obj {
			t.Helper()
			return ok[obj](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+id, body), http.StatusOK)
		}

		// Defaults: no auto_disable field; health shows the server's rule.
		sub := b.createSub(t, obj{})
		got := get(sub.ID)
		require.NotContains(t, got, "auto_disable")
		require.Equal(t, obj{
			"consecutive_failures": float64(0), "failing_since": nil, "attempts_24h": float64(0), "success_rate_24h": nil,
			"auto_disable": obj{"consecutive_failures": float64(herald.DefaultAutoDisableFailures),
				"min_duration_s": float64(herald.DefaultAutoDisableAfter / time.Second)},
		}, got["health"])

		// Its own rule, then never (null), then the server's again.
		got = patch(sub.ID, `{"auto_disable": {"consecutive_failures": 5, "min_duration_s": 3600}}`)
		require.Equal(t, obj{"consecutive_failures": float64(5), "min_duration_s": float64(3600)}, got["auto_disable"])
		require.NotContains(t, got, "health", "only GET shows health")
		require.Equal(t, got["auto_disable"], get(sub.ID)["health"].(obj)["auto_disable"])
		got = patch(sub.ID, `{"description": "kept"}`)
		require.Equal(t, obj{"consecutive_failures": float64(5), "min_duration_s": float64(3600)}, got["auto_disable"],
			"a patch without auto_disable keeps it")
		got = patch(sub.ID, `{"auto_disable": null}`)
		require.Contains(t, got, "auto_disable")
		require.Nil(t, got["auto_disable"])
		require.Nil(t, get(sub.ID)["health"].(obj)["auto_disable"], "never")
		got = patch(sub.ID, `{"description": "still never"}`)
		require.Contains(t, got, "auto_disable")
		require.Nil(t, got["auto_disable"])
		got = patch(sub.ID, `{"auto_disable": "default"}`)
		require.NotContains(t, got, "auto_disable")

		never := b.createSub(t, obj{"auto_disable": nil})
		require.NotNil(t, never.AutoDisable)
		require.Equal(t, "null", string(never.AutoDisable))

		for _, bad := range []struct {
			body  string
			code  herald.Code
			field string
		}{
			{`{"auto_disable": {"consecutive_failures": 0}}`, herald.CodeInvalidField, "auto_disable.consecutive_failures"},
			{`{"auto_disable": {"min_duration_s": 10}}`, herald.CodeMissingField, "auto_disable.consecutive_failures"},
			{`{"auto_disable": {"consecutive_failures": 3, "min_duration_s": -1}}`, herald.CodeInvalidField, "auto_disable.min_duration_s"},
			{`{"auto_disable": {"consecutive_failures": 3, "after": 1}}`, herald.CodeUnknownField, "auto_disable.after"},
			{`{"auto_disable": "never"}`, herald.CodeInvalidField, "auto_disable"},
		} {
			requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+sub.ID, bad.body), http.StatusBadRequest, bad.code, bad.field)
		}
		requireError(t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+sub.ID, `{"health": {}}`),
			http.StatusBadRequest, herald.CodeInvalidField, "health")

		// Failed attempts as the delivery engine records them, then the
		// auto-disable it decides.
		now := time.Now().UTC().Truncate(time.Millisecond)
		first := now.Add(-time.Hour)
		_, err := s.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{
			Health:               []store.HealthUpdate{{SubscriptionID: sub.ID, Attempts: 4, Successes: 1, Failures: 3, FailingSince: first}},
			DisableSubscriptions: []store.SubscriptionDisable{{ID: sub.ID, Reason: herald.DisabledReasonFailing, MinFailures: 3}},
			Now:                  now,
		})
		require.NoError(t, err)
		got = get(sub.ID)
		require.Equal(t, "disabled", got["state"])
		require.Equal(t, "failing", got["disabled_reason"])
		h := got["health"].(obj)
		require.Equal(t, float64(3), h["consecutive_failures"])
		require.Equal(t, first.Format(time.RFC3339Nano), h["failing_since"])
		require.Equal(t, float64(4), h["attempts_24h"])
		require.InDelta(t, 0.25, h["success_rate_24h"], 1e-9)

		// Re-enabling resumes it with an empty streak.
		got = patch(sub.ID, obj{"state": "enabled"})
		require.Equal(t, "enabled", got["state"])
		require.Empty(t, got["disabled_reason"])
		h = get(sub.ID)["health"].(obj)
		require.Equal(t, float64(0), h["consecutive_failures"])
		require.Nil(t, h["failing_since"])
		require.Equal(t, float64(4), h["attempts_24h"], "the counts stay")
	})
}

// TestSubscriptionHealthServerRule: a server rule that never disables
// (--auto-disable-failures 0) shows no rule in force, whatever the
// subscription's own.
func TestSubscriptionHealthServerRule(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.handler.(*server).cfg.AutoDisable = &herald.AutoDisable{}
		sub := b.createSub(t, obj{"auto_disable": obj{"consecutive_failures": 3}})
		got := ok[obj](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID, nil), http.StatusOK)
		require.Nil(t, got["health"].(obj)["auto_disable"])
	})
}
