package main

import (
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/stretchr/testify/require"
)

//go:embed testdata/firefox
var firefoxPage embed.FS

// firefoxBinary finds Debian's firefox-esr. Outside CI a machine without it
// skips the test, visibly; under CI=true it must be there (.ci/run
// installs it).
func firefoxBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"firefox-esr", "firefox"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("firefox-esr is not installed (CI=true: .ci/run installs it with apt-get)")
	}
	t.Skip("SKIP: firefox-esr is not installed; apt-get install firefox-esr to run the real-browser Web Push test")
	return ""
}

// pageServer serves the test page and service worker on 127.0.0.1 and
// collects what the browser reports.
type pageServer struct {
	*httptest.Server
	vapidPublic string
	mu          sync.Mutex
	subs        []webpush.Subscription
	got         []string
	logs        []string
}

func newPageServer(t *testing.T, vapidPublic string) *pageServer {
	t.Helper()
	ps := &pageServer{vapidPublic: vapidPublic}
	mux := http.NewServeMux()
	serve := func(name, ctype string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, err := firefoxPage.ReadFile("testdata/firefox/" + name)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			w.Header().Set("Content-Type", ctype)
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(b)
		}
	}
	mux.HandleFunc("GET /{$}", serve("index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /page.js", serve("page.js", "text/javascript"))
	mux.HandleFunc("GET /sw.js", serve("sw.js", "text/javascript"))
	mux.HandleFunc("GET /vapid", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, ps.vapidPublic) })
	record := func(dst *[]string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			ps.mu.Lock()
			*dst = append(*dst, string(b))
			ps.mu.Unlock()
		}
	}
	mux.HandleFunc("POST /got", record(&ps.got))
	mux.HandleFunc("POST /log", record(&ps.logs))
	mux.HandleFunc("POST /subscription", func(w http.ResponseWriter, r *http.Request) {
		var s webpush.Subscription
		if err := json.NewDecoder(r.Body).Decode(&s); err == nil {
			ps.mu.Lock()
			ps.subs = append(ps.subs, s)
			ps.mu.Unlock()
		}
	})
	ps.Server = httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(ps.Close)
	return ps
}

func (ps *pageServer) state() (subs []webpush.Subscription, got, logs []string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]webpush.Subscription(nil), ps.subs...), append([]string(nil), ps.got...), append([]string(nil), ps.logs...)
}

// firefoxPrefs point Firefox's push service at herald and keep it from
// reaching the internet (this machine has none) or asking for permission.
const firefoxPrefs = `user_pref("dom.push.enabled", true);
user_pref("dom.push.connection.enabled", true);
user_pref("dom.push.serverURL", "%s");
user_pref("dom.push.testing.allowInsecureServerURL", true);
user_pref("dom.push.testing.ignorePermission", true);
user_pref("dom.serviceWorkers.enabled", true);
user_pref("dom.serviceWorkers.testing.enabled", true);
user_pref("permissions.default.desktop-notification", 1);
user_pref("network.manage-offline-status", false);
user_pref("network.captive-portal-service.enabled", false);
user_pref("network.connectivity-service.enabled", false);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("browser.aboutwelcome.enabled", false);
user_pref("browser.safebrowsing.malware.enabled", false);
user_pref("browser.safebrowsing.phishing.enabled", false);
user_pref("browser.safebrowsing.downloads.enabled", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("datareporting.healthreport.uploadEnabled", false);
user_pref("toolkit.telemetry.enabled", false);
user_pref("app.update.auto", false);
user_pref("app.normandy.enabled", false);
user_pref("extensions.update.enabled", false);
user_pref("services.settings.server", "http://127.0.0.1:1/");
user_pref("toolkit.startup.max_resumed_crashes", -1);
`

// startFirefox runs headless Firefox on url with profile until the test
// ends or stop is called.
func startFirefox(t *testing.T, bin, profile, url string) (stop func()) {
	t.Helper()
	cmd := exec.Command(bin, "--headless", "--no-remote", "--profile", profile, url)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "MOZ_HEADLESS=1", "HOME="+profile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	var once sync.Once
	stop = func() {
		once.Do(func() {
			// Firefox runs several processes: end the whole group.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
			if t.Failed() {
				t.Logf("firefox output:\n%s", logs.Tail(40))
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestFirefoxWebPush drives a real Firefox ESR against herald: a page
// subscribes (with an applicationServerKey), webpush-go sends to the
// endpoint Firefox was given, and the service worker's push event reports
// the decrypted plaintext. Then Firefox is stopped, a message is sent
// while it is away (stored), and a restarted Firefox with the same profile
// receives it.
func TestFirefoxWebPush(t *testing.T) {
	ffBin := firefoxBinary(t)
	bin := heraldBinary(t)
	addr := freeAddr(t)
	startNode(t, bin, addr, "--data-dir", t.TempDir(), "--dev", "--api-token", "test-token")

	vapidPrivate, vapidPublic, err := webpush.GenerateVAPIDKeys()
	require.NoError(t, err)
	page := newPageServer(t, vapidPublic)
	profile := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(profile, "user.js"),
		[]byte(fmt.Sprintf(firefoxPrefs, "ws://"+addr+"/")), 0o600))

	waitSub := func(n int) webpush.Subscription {
		t.Helper()
		var sub webpush.Subscription
		waitFor(t, 90*time.Second, func() (bool, string) {
			subs, _, logs := page.state()
			if len(subs) >= n {
				sub = subs[n-1]
				return true, ""
			}
			return false, strings.Join(logs, "\n")
		}, func(last string) string { return "no subscription from Firefox; page errors: " + last })
		return sub
	}
	send := func(sub webpush.Subscription, text string) {
		t.Helper()
		resp, err := webpush.SendNotification([]byte(text), &sub, &webpush.Options{
			Subscriber: "ops@example.test", VAPIDPublicKey: vapidPublic, VAPIDPrivateKey: vapidPrivate, TTL: 600,
		})
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	}
	waitGot := func(text string) {
		t.Helper()
		waitFor(t, 60*time.Second, func() (bool, string) {
			_, got, _ := page.state()
			for _, g := range got {
				if g == text {
					return true, ""
				}
			}
			return false, strings.Join(got, " | ")
		}, func(last string) string { return fmt.Sprintf("Firefox did not receive %q; got: %s", text, last) })
	}

	stop := startFirefox(t, ffBin, profile, page.URL+"/")
	sub := waitSub(1)
	require.True(t, strings.HasPrefix(sub.Endpoint, "http://"+addr+"/wpush/v2/"), sub.Endpoint)
	send(sub, "hello from herald ✓")
	waitGot("hello from herald ✓")

	// Away: the message is stored, and delivered when Firefox is back.
	stop()
	send(sub, "stored while you were away")
	startFirefox(t, ffBin, profile, page.URL+"/")
	waitGot("stored while you were away")
	// The restarted browser normally reports the subscription it kept.
	// Once, in a full parallel run of the suite, it reported a new one
	// after receiving the stored message on the old: then the new endpoint
	// must work as well.
	subs, _, _ := page.state()
	if last := subs[len(subs)-1]; last.Endpoint != sub.Endpoint {
		t.Logf("the restarted Firefox subscribed again: %s", last.Endpoint)
		send(last, "to the new subscription")
		waitGot("to the new subscription")
	}
}
