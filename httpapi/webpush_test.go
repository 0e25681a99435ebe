package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
)

type fakeWebPushKeys struct {
	key string
	err error
}

func (f fakeWebPushKeys) PublicKey(context.Context) (string, error) { return f.key, f.err }

// TestWebPushKey: GET /v1/webpush/vapid-public-key answers the key without
// a token, and 503 when the key cannot be read.
func TestWebPushKey(t *testing.T) {
	t.Parallel()
	const key = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
	s := testdb.SQLite(t)
	keys := &fakeWebPushKeys{key: key}
	b := &testBundle{store: s}
	b.handler = New(Config{Store: s, Publisher: failingPublisher{}, Auth: NewTokenAuth(s, testToken), WebPush: keys,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	got := ok[map[string]string](t, b.do(t, http.MethodGet, "/v1/webpush/vapid-public-key", nil, withoutToken()), http.StatusOK)
	require.Equal(t, map[string]string{"public_key": key}, got)
	require.Equal(t, ScopePublic, RouteScopes(b.handler)["GET /v1/webpush/vapid-public-key"])

	keys.err = errors.New("the VAPID private key cannot be read")
	res := b.do(t, http.MethodGet, "/v1/webpush/vapid-public-key", nil, withoutToken())
	require.Equal(t, http.StatusServiceUnavailable, res.code, "%s", res.body)

	// Without Config.WebPush there is no such route.
	plain := setup(t, s)
	require.Equal(t, http.StatusNotFound, plain.do(t, http.MethodGet, "/v1/webpush/vapid-public-key", nil, notDocumented()).code)
}
