package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/client"
	listendest "github.com/heraldhq/herald/destination/listen"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// GET /v1/subscriptions/{id}/listen over a real server: a listen
// subscription takes a listener authenticated by a token with
// subscriptions:write on it (a tenant-confined token: its own tenant's
// only); another destination type is a conflict; a plain GET is not a
// WebSocket. A destination of type listen has no fields.
func TestListenEndpoint(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		hub := listendest.New(listendest.Config{})
		t.Cleanup(hub.Close)
		b := &testBundle{store: s, notified: make(chan struct{}, 1000)}
		b.handler = New(Config{Store: s, Publisher: failingPublisher{}, Auth: NewTokenAuth(s, testToken), Listen: hub,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		srv := httptest.NewServer(b.handler)
		t.Cleanup(srv.Close)
		ctx := context.Background()

		tokA := b.createToken(t, obj{"name": "acme", "scopes": allScopesButAdmin, "tenant": "acme"}).Token
		tokB := b.createToken(t, obj{"name": "globex", "scopes": allScopesButAdmin, "tenant": "globex"}).Token
		readA := b.createToken(t, obj{"name": "acme reader", "scopes": []string{"subscriptions:read"}, "tenant": "acme"}).Token
		subA := ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions",
			obj{"destination": obj{"type": "listen"}, "event_types": []string{"a.*"}}, withToken(tokA)), http.StatusCreated)
		require.Equal(t, herald.DestinationListen, subA.Destination.Type)
		require.Empty(t, subA.URL)
		hook := b.createSub(t, obj{})

		// The admin token may listen.
		admin, err := client.New(srv.URL, testToken).Listen(ctx, subA.ID)
		require.NoError(t, err)
		_ = admin.Close()

		// So may the tenant's own token; it replaces the admin's listener.
		sess, err := client.New(srv.URL, tokA).Listen(ctx, subA.ID)
		require.NoError(t, err)
		require.Equal(t, subA.ID, sess.SubscriptionID)
		require.Eventually(t, func() bool { return hub.Connected(subA.ID) }, 5*time.Second, 10*time.Millisecond)
		served := make(chan error, 1)
		go func() {
			served <- sess.Serve(ctx, func(context.Context, *client.ListenRequest) *client.ListenResponse {
				return &client.ListenResponse{Status: 204}
			})
		}()
		t.Cleanup(func() { _ = sess.Close() })
		res := hub.Send(ctx, &webhook.Request{Body: []byte(`{}`), MsgID: "dlv_x", Secrets: []string{webhook.NewSecret()},
			SubscriptionID: subA.ID, EventType: "a.b", Timeout: 5 * time.Second})
		require.True(t, res.Success, res.Message)
		require.Equal(t, 204, res.Status)

		for _, c := range []struct {
			name, token, id string
			status          int
			code            string
		}{
			{"other tenant", tokB, subA.ID, http.StatusNotFound, "not_found"},
			{"read-only token", readA, subA.ID, http.StatusForbidden, "forbidden"},
			{"no token", "", subA.ID, http.StatusUnauthorized, "unauthorized"},
			{"unknown subscription", testToken, "sub_nope", http.StatusNotFound, "not_found"},
			{"webhook subscription", testToken, hook.ID, http.StatusConflict, "conflict"},
		} {
			_, err := client.New(srv.URL, c.token).Listen(ctx, c.id)
			var ae *client.APIError
			require.ErrorAs(t, err, &ae, c.name)
			require.Equal(t, c.status, ae.Status, "%s: %s", c.name, ae.Message)
			require.Equal(t, c.code, ae.Code, c.name)
		}

		// Not a WebSocket request.
		res2 := b.do(t, http.MethodGet, "/v1/subscriptions/"+subA.ID+"/listen", nil)
		requireError(t, res2, http.StatusUnprocessableEntity, herald.CodeUnprocessable, "")
		// A listen destination takes no fields.
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"destination": obj{"type": "listen", "url": "https://example.com"}}),
			http.StatusBadRequest, herald.CodeInvalidField, "destination.url")
		// A webhook may become a listen subscription and back.
		patched := ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+hook.ID, obj{"destination": obj{"type": "listen"}}), http.StatusOK)
		require.Equal(t, herald.DestinationListen, patched.Destination.Type)
		require.Empty(t, patched.URL)
		back := ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+hook.ID, obj{"url": "https://example.com/again"}), http.StatusOK)
		require.Equal(t, herald.DestinationWebhook, back.Destination.Type)

		// A listener whose subscription stops being a listen destination,
		// or is deleted, is told so (4002) and stops.
		requireGone := func(done <-chan error) {
			t.Helper()
			select {
			case err := <-done:
				var closed *client.ListenClosedError
				require.ErrorAs(t, err, &closed)
				require.Equal(t, client.ListenCloseGone, closed.Code)
				require.Equal(t, listendest.CloseGone, closed.Code)
			case <-time.After(10 * time.Second):
				t.Fatal("the listener was not closed")
			}
		}
		ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+subA.ID, obj{"description": "still listen"}, withToken(tokA)), http.StatusOK)
		require.True(t, hub.Connected(subA.ID), "a patch that keeps the listen destination keeps the listener")
		ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+subA.ID, obj{"url": "https://example.com/a"}, withToken(tokA)), http.StatusOK)
		requireGone(served)
		require.False(t, hub.Connected(subA.ID))

		subC := ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"destination": obj{"type": "listen"}}), http.StatusCreated)
		sessC, err := client.New(srv.URL, testToken).Listen(ctx, subC.ID)
		require.NoError(t, err)
		servedC := make(chan error, 1)
		go func() {
			servedC <- sessC.Serve(ctx, func(context.Context, *client.ListenRequest) *client.ListenResponse { return nil })
		}()
		require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/subscriptions/"+subC.ID, nil).code)
		requireGone(servedC)
	})
}
