package ui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func setup(t *testing.T) http.Handler {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /ui/", New("/ui/"))
	mux.Handle("GET /{$}", Redirect("/ui/"))
	return mux
}

func get(t *testing.T, h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, path := range []string{"/ui/", "/ui/deliveries/dlv_1", "/ui/assets/app.js", "/ui/assets/nope.js"} {
		rec := get(t, h, path)
		csp := rec.Header().Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'self'", path)
		require.Contains(t, csp, "script-src 'self';", path)
		require.Contains(t, csp, "frame-ancestors 'none'", path)
		require.Contains(t, csp, "base-uri 'none'", path)
		require.NotContains(t, csp, "unsafe-inline", path)
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"), path)
		require.Equal(t, "no-referrer", rec.Header().Get("Referrer-Policy"), path)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	tests := []struct {
		path, wantType string
		wantCode       int
		wantBody       string
	}{
		{"/ui/", "text/html; charset=utf-8", 200, `<script type="module" src="/ui/assets/app.js">`},
		{"/ui/subscriptions/sub_1", "text/html; charset=utf-8", 200, `data-prefix="/ui/"`},
		{"/ui/dead-letters?x=1", "text/html; charset=utf-8", 200, "<title>herald</title>"},
		{"/ui/tokens", "text/html; charset=utf-8", 200, `data-prefix="/ui/"`},
		{"/ui/assets/tokens.js", "text/javascript; charset=utf-8", 200, "/v1/tokens"},
		{"/ui/sources/orders-in", "text/html; charset=utf-8", 200, `data-prefix="/ui/"`},
		{"/ui/assets/sources.js", "text/javascript; charset=utf-8", 200, "/v1/sources"},
		{"/ui/event-types", "text/html; charset=utf-8", 200, `data-prefix="/ui/"`},
		{"/ui/assets/eventtypes.js", "text/javascript; charset=utf-8", 200, "/v1/event-types"},
		{"/ui/assets/app.js", "text/javascript; charset=utf-8", 200, "import"},
		{"/ui/assets/app.css", "text/css; charset=utf-8", 200, ":root"},
		{"/ui/assets/favicon.svg", "image/svg+xml", 200, "<svg"},
		{"/ui/assets/missing.js", "", 404, ""},
		{"/ui/assets/index.html", "", 404, ""},
	}
	for _, tt := range tests {
		rec := get(t, h, tt.path)
		require.Equal(t, tt.wantCode, rec.Code, tt.path)
		if tt.wantCode == 200 {
			require.Equal(t, tt.wantType, rec.Header().Get("Content-Type"), tt.path)
			require.Contains(t, rec.Body.String(), tt.wantBody, tt.path)
			require.NotContains(t, rec.Body.String(), "{{PREFIX}}", tt.path)
		}
	}
	rec := get(t, h, "/")
	require.Equal(t, http.StatusFound, rec.Code)
	require.Equal(t, "/ui/", rec.Header().Get("Location"))
}

func TestETag(t *testing.T) {
	t.Parallel()
	h := setup(t)
	rec := get(t, h, "/ui/assets/lib.js")
	etag := rec.Header().Get("ETag")
	require.Regexp(t, `^"[0-9a-f]{16}"$`, etag)
	require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"))
	rec = get(t, h, "/ui/assets/lib.js", "If-None-Match", etag)
	require.Equal(t, http.StatusNotModified, rec.Code)
	require.Empty(t, rec.Body.String())
	rec = get(t, h, "/ui/assets/lib.js", "If-None-Match", `"other"`)
	require.Equal(t, http.StatusOK, rec.Code)
}

func TestMethods(t *testing.T) {
	t.Parallel()
	h := New("/ui/")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/ui/", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/ui/assets/app.css", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Empty(t, rec.Body.String())
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	h := New("/admin/dash")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/dash/events", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `src="/admin/dash/assets/app.js"`)
}

// TestNoExternalReferences keeps the dashboard free of third-party
// requests and of what the CSP would block: no absolute URL to another
// origin, no inline script or style, no HTML parsing of
// data, and the token never in localStorage.
func TestNoExternalReferences(t *testing.T) {
	t.Parallel()
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^\s'"` + "`" + `]*`)
	// The SVG namespace is a name, not a request; example.com is a
	// placeholder in a form field.
	allowed := map[string]bool{"http://www.w3.org/2000/svg": true, "https://example.com/webhooks": true}
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<style|\sstyle=|\son[a-z]+=`)
	n := 0
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		s := string(b)
		for _, m := range url.FindAllString(s, -1) {
			require.True(t, allowed[m], "%s references %s", p, m)
		}
		if strings.HasSuffix(p, ".html") {
			require.False(t, inline.MatchString(s), "%s has inline script or style", p)
		}
		for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage"} {
			require.False(t, strings.Contains(s, banned), "%s uses %s", p, banned)
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, n, 5)
}

func TestPortalMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		ancestors []string
		wantFrame string
		wantXFO   string
	}{
		{"not framable by default", nil, "frame-ancestors 'none'", "DENY"},
		{"framable by listed origins", []string{"https://app.example.com", "http://127.0.0.1:9"}, "frame-ancestors https://app.example.com http://127.0.0.1:9;", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := NewPortal("", tc.ancestors)
			for _, path := range []string{"/portal/", "/portal/subscriptions/sub_1", "/portal/assets/app.js"} {
				rec := get(t, h, path)
				require.Equal(t, http.StatusOK, rec.Code, path)
				csp := rec.Header().Get("Content-Security-Policy")
				require.Contains(t, csp, tc.wantFrame, path)
				require.Contains(t, csp, "script-src 'self';", path)
				require.NotContains(t, csp, "unsafe-inline", path)
				require.Equal(t, tc.wantXFO, rec.Header().Get("X-Frame-Options"), path)
			}
			body := get(t, h, "/portal/").Body.String()
			require.Contains(t, body, `data-prefix="/portal/" data-mode="portal"`)
			require.Contains(t, body, `src="/portal/assets/app.js"`)
		})
	}
	// The operator's dashboard is unchanged by a portal's framing.
	require.Contains(t, get(t, setup(t), "/ui/").Body.String(), `data-mode="operator"`)
}
