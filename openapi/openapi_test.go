package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/openapi"
	"github.com/heraldhq/herald/openapi/openapitest"
	"github.com/heraldhq/herald/push"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/ui"
)

// TestDocsCopy fails when docs/openapi.json is not a byte-identical copy
// of the embedded document: run `go generate ./openapi` (make openapi).
func TestDocsCopy(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile("../docs/openapi.json")
	require.NoError(t, err)
	require.True(t, bytes.Equal(openapi.Document(), docs),
		"docs/openapi.json differs from openapi/openapi.json: run `go generate ./openapi` (or `make openapi`)")
}

func TestDocumentIsValid(t *testing.T) {
	t.Parallel()
	_, err := openapitest.Default()
	require.NoError(t, err)
	var doc struct {
		OpenAPI  string         `json:"openapi"`
		Webhooks map[string]any `json:"webhooks"`
	}
	require.NoError(t, json.Unmarshal(openapi.Document(), &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.Contains(t, doc.Webhooks, "event")
}

// TestErrorCodes: the Error schema's enum is exactly the API's error table.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas struct {
				ErrorCode struct {
					Enum []string `json:"enum"`
				} `json:"ErrorCode"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openapi.Document(), &doc))
	got := doc.Components.Schemas.ErrorCode.Enum
	slices.Sort(got)
	require.Equal(t, httpapi.ErrorCodes(), got)
}

func TestHandler(t *testing.T) {
	t.Parallel()
	v, err := openapitest.Default()
	require.NoError(t, err)
	h := openapi.Handler()
	get := func(header http.Header) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/openapi.json", nil)
		for k, vs := range header {
			req.Header[k] = vs
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.NoError(t, v.Check(req, nil, rec.Code, rec.Header(), rec.Body.Bytes()))
		return rec
	}
	rec := get(nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Equal(t, openapi.Document(), rec.Body.Bytes())
	etag := rec.Header().Get("ETag")
	require.NotEmpty(t, etag)

	for _, match := range []string{etag, "W/" + etag, `"x", ` + etag, "*"} {
		rec = get(http.Header{"If-None-Match": {match}})
		require.Equal(t, http.StatusNotModified, rec.Code, match)
		require.Empty(t, rec.Body.Bytes())
	}
	rec = get(http.Header{"If-None-Match": {`"other"`}})
	require.Equal(t, http.StatusOK, rec.Code)
}

// fakeBroadcaster mounts the push broadcast routes.
type fakeBroadcaster struct{}

func (fakeBroadcaster) BroadcastPut(context.Context, string, string) error { return nil }
func (fakeBroadcaster) BroadcastList(context.Context) (map[string]string, error) {
	return map[string]string{}, nil
}

// fakeWebPushKeys mounts GET /v1/webpush/vapid-public-key.
type fakeWebPushKeys struct{}

func (fakeWebPushKeys) PublicKey(context.Context) (string, error) { return "", nil }

// routePatterns returns every public route of a full `herald serve`: the
// API with all its optional routes and Extra routes, and the push service.
func routePatterns(t *testing.T) []string {
	t.Helper()
	s := testdb.SQLite(t)
	dummy := http.NotFoundHandler()
	api := httpapi.New(httpapi.Config{
		Store: s, Publisher: ingest.New(ingest.Config{Store: s}), Auth: httpapi.NewTokenAuth(s, "x"),
		Metrics: dummy,
		Push:    fakeBroadcaster{},
		WebPush: fakeWebPushKeys{},
		Extra: map[string]http.Handler{
			"GET /openapi.json": openapi.Handler(),
			// The dashboard's routes, as cmd/herald mounts them.
			"GET /ui/": ui.New("/ui/"),
			"GET /{$}": ui.Redirect("/ui/"),
		},
	})
	keys, err := push.ParseKeys(push.GenerateKey())
	require.NoError(t, err)
	ps, err := push.New(push.Config{Store: s.(store.PushStore), Keys: keys, EndpointURL: "http://127.0.0.1:8080", NodeID: "test"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ps.Close() })
	return append(httpapi.Patterns(api), ps.Patterns()...)
}

// operation maps a ServeMux pattern to the "METHOD /path" of its OpenAPI
// operation (see the package comment).
func operation(pattern string) string {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	path = strings.TrimSuffix(path, "{$}")
	path = strings.ReplaceAll(path, "...}", "}")
	return method + " " + path
}

// documented lists the document's operations as "METHOD /path".
func documented(t *testing.T) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openapi.Document(), &doc))
	var ops []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops = append(ops, strings.ToUpper(method)+" "+path)
			}
		}
	}
	return ops
}

// TestDrift fails when a route is registered but not documented, or
// documented but not registered.
func TestDrift(t *testing.T) {
	t.Parallel()
	registered := map[string]bool{}
	for _, p := range routePatterns(t) {
		registered[operation(p)] = true
	}
	doc := map[string]bool{}
	for _, op := range documented(t) {
		doc[op] = true
	}
	var missing, stale []string
	for op := range registered {
		if !doc[op] {
			missing = append(missing, op)
		}
	}
	for op := range doc {
		if !registered[op] {
			stale = append(stale, op)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	require.Empty(t, missing, "routes registered but missing from openapi/openapi.json")
	require.Empty(t, stale, "operations in openapi/openapi.json that no router registers")
	require.Greater(t, len(doc), 30)
}

func TestOperationMapping(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string]string{
		"GET /v1/subscriptions/{id}":      "GET /v1/subscriptions/{id}",
		"PUT /v1/push/broadcasts/{id...}": "PUT /v1/push/broadcasts/{id}",
		"GET /{$}":                        "GET /",
		"GET /ui/":                        "GET /ui/",
		"/push/ws":                        "GET /push/ws",
		"DELETE /m/{id}":                  "DELETE /m/{id}",
	} {
		require.Equal(t, want, operation(pattern), pattern)
	}
	require.Equal(t, "/v1/push/broadcasts/{id...}", openapitest.Pattern("/v1/push/broadcasts/{id}", map[string]bool{"id": true}))
	require.Equal(t, "/{$}", openapitest.Pattern("/", nil))
	require.Equal(t, "/ui/", openapitest.Pattern("/ui/", nil))
}

// TestScopeDrift: every /v1 operation's x-herald-scope is the scope its
// route declares in code (httpapi.RouteScopes), and every /v1 route
// declares one.
func TestScopeDrift(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	api := httpapi.New(httpapi.Config{
		Store: s, Publisher: ingest.New(ingest.Config{Store: s}), Auth: httpapi.NewTokenAuth(s, "x"),
		Push: fakeBroadcaster{}, WebPush: fakeWebPushKeys{},
	})
	code := map[string]string{}
	for pattern, scope := range httpapi.RouteScopes(api) {
		code[operation(pattern)] = string(scope)
	}
	for _, p := range httpapi.Patterns(api) {
		if op := operation(p); strings.Contains(op, " /v1/") {
			require.NotEmpty(t, code[op], "route %s declares no scope", op)
		}
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openapi.Document(), &doc))
	documented := map[string]string{}
	for path, item := range doc.Paths {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op struct {
				Scope string `json:"x-herald-scope"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			documented[strings.ToUpper(method)+" "+path] = op.Scope
		}
	}
	require.Equal(t, code, documented, "x-herald-scope in openapi/openapi.json differs from the scopes the routes declare")
}
