package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPushDemo: the page, its module and the worker are served under the
// prefix with the dashboard's CSP; nothing else is.
func TestPushDemo(t *testing.T) {
	h := PushDemo()
	for path, want := range map[string]string{
		PushDemoPrefix:                "text/html",
		PushDemoPrefix + "demo.js":    "text/javascript",
		PushDemoPrefix + "sw.js":      "text/javascript",
		PushDemoPrefix + "demo.css":   "text/css",
		PushDemoPrefix + "index.html": "text/html",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), want) {
			t.Errorf("%s: %d %q, want 200 %s", path, rec.Code, rec.Header().Get("Content-Type"), want)
		}
		if rec.Header().Get("Content-Security-Policy") != CSP {
			t.Errorf("%s: CSP %q", path, rec.Header().Get("Content-Security-Policy"))
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PushDemoPrefix+"../ui.go", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("unknown file: %d, want 404", rec.Code)
	}
}
