package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/seal"
)

// demoHook is added to the demo page by the test's proxy: it presses
// Subscribe and reports what the page shows (the subscription JSON and
// the received messages), so the test drives the real page and worker
// without test code in them. Same origin, so the page's CSP allows it.
const demoHook = `
document.getElementById("subscribe").click();
setInterval(() => {
  const state = {
    subscription: document.getElementById("subscription").textContent,
    status: document.getElementById("status").textContent,
    received: [...document.querySelectorAll("#received .message")].map((e) => e.textContent),
  };
  fetch("/test/state", { method: "POST", body: JSON.stringify(state) });
}, 300);
`

type demoState struct {
	Subscription string   `json:"subscription"`
	Status       string   `json:"status"`
	Received     []string `json:"received"`
}

// TestPushDemoFirefox: headless Firefox ESR, its push service pointed at
// herald (as TestFirefoxWebPush), opens herald's --dev demo page,
// subscribes with herald's VAPID key, and receives what herald push send
// --from-store sends to the subscription the page shows. Firefox, not
// Chromium: Chromium's push service is FCM, which a loopback test cannot
// reach or replace.
func TestPushDemoFirefox(t *testing.T) {
	ffBin := firefoxBinary(t)
	bin := heraldBinary(t)
	key, err := seal.GenerateKey()
	require.NoError(t, err)
	storeArgs := []string{"--data-dir", t.TempDir(), "--encryption-key", key}
	addr := freeAddr(t)
	startNode(t, bin, addr, append([]string{"--dev", "--api-token", "tok"}, storeArgs...)...)

	// The proxy serves herald's page with the hook added, and collects
	// the hook's reports.
	target, _ := url.Parse("http://" + addr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/dev/push-demo/" || resp.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		b = bytes.Replace(b, []byte("</head>"), []byte(`<script type="module" src="/test/hook.js"></script></head>`), 1)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		resp.Header.Del("ETag")
		return nil
	}
	var (
		mu    sync.Mutex
		state demoState
	)
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.HandleFunc("GET /test/hook.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = io.WriteString(w, demoHook)
	})
	mux.HandleFunc("POST /test/state", func(w http.ResponseWriter, r *http.Request) {
		var s demoState
		if json.NewDecoder(r.Body).Decode(&s) == nil {
			mu.Lock()
			state = s
			mu.Unlock()
		}
	})
	page := httptest.NewServer(mux)
	t.Cleanup(page.Close)
	current := func() demoState { mu.Lock(); defer mu.Unlock(); return state }

	profile := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(profile, "user.js"),
		[]byte(fmt.Sprintf(firefoxPrefs, "ws://"+addr+"/")), 0o600))
	startFirefox(t, ffBin, profile, page.URL+"/dev/push-demo/")

	var sub struct {
		Endpoint string `json:"endpoint"`
	}
	waitFor(t, 150*time.Second, func() (bool, string) {
		s := current()
		return s.Subscription != "" && json.Unmarshal([]byte(s.Subscription), &sub) == nil, s.Status
	}, func(last string) string { return "the demo page showed no subscription; status: " + last })
	require.True(t, strings.HasPrefix(sub.Endpoint, "http://"+addr+"/wpush/v2/"), sub.Endpoint)

	// What the page shows is what herald push send takes.
	subFile := filepath.Join(t.TempDir(), "sub.json")
	require.NoError(t, os.WriteFile(subFile, []byte(current().Subscription), 0o600))
	out, err := exec.Command(bin, append([]string{"push", "send", "--subscription", "@" + subFile, "--from-store",
		"--data", "hello from herald push send ✓"}, storeArgs...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "201 Created")

	waitFor(t, 60*time.Second, func() (bool, string) {
		s := current()
		for _, m := range s.Received {
			if m == "hello from herald push send ✓" {
				return true, ""
			}
		}
		return false, strings.Join(s.Received, " | ") + " (status: " + s.Status + ")"
	}, func(last string) string { return "the demo page did not show the message; it shows: " + last })
}
