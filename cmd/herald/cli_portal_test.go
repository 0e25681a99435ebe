package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIPortal: herald portal create prints a link whose token opens a
// session once, with the theme given by flags (the logo read from a file).
func TestCLIPortal(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		logo := filepath.Join(t.TempDir(), "logo.svg")
		require.NoError(t, os.WriteFile(logo, []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>`), 0o600))
		r := h.run("portal", "create", "--tenant", "acme", "--ttl", "10m", "--name", "Example", "--accent", "#0b7285", "--logo", logo)
		require.Equal(t, 0, r.code, r.stderr)
		url := strings.TrimSpace(r.stdout)
		_, link, found := strings.Cut(url, "/portal/#link=")
		require.True(t, found, url)
		require.Contains(t, r.stderr, "works once")

		exchange := func() (int, map[string]any) {
			resp, err := http.Post(h.server+"/v1/portal/sessions", "application/json", strings.NewReader(`{"link":"`+link+`"}`))
			require.NoError(t, err)
			defer resp.Body.Close()
			var v map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
			return resp.StatusCode, v
		}
		code, sess := exchange()
		require.Equal(t, http.StatusOK, code, "%v", sess)
		require.Equal(t, "acme", sess["tenant"])
		theme, _ := sess["theme"].(map[string]any)
		require.Equal(t, "Example", theme["name"])
		require.Equal(t, "#0b7285", theme["accent"])
		require.True(t, strings.HasPrefix(theme["logo"].(string), "data:image/svg+xml;base64,"), "%v", theme)
		code, _ = exchange()
		require.Equal(t, http.StatusUnauthorized, code, "a link works once")

		out := h.okJSON("portal", "create", "--tenant", "acme")[0]
		require.Contains(t, out["url"], "/portal/#link=")
		require.NotEmpty(t, out["expires_at"])

		r = h.run("portal", "create", "--tenant", "acme", "--ttl", "48h")
		require.NotEqual(t, 0, r.code)
		require.Contains(t, r.stderr, "ttl_s")
		r = h.run("portal", "create")
		require.Equal(t, 2, r.code, r.stderr)
	})
}
