package ui

import (
	"embed"
	"net/http"
	"strings"
)

// The Web Push demo page (herald serve --dev only): a service worker that
// subscribes with herald's VAPID key, shows the subscription and a ready
// herald push send command, and shows the pushes it receives.

//go:embed pushdemo
var pushDemoFiles embed.FS

// PushDemoPrefix is where herald serve --dev mounts PushDemo.
const PushDemoPrefix = "/dev/push-demo/"

// pushDemoFile maps the URL names under the prefix to the embedded files;
// nothing else is served.
var pushDemoFile = map[string]string{
	"": "index.html", "index.html": "index.html", "demo.js": "demo.js", "sw.js": "sw.js", "demo.css": "demo.css",
}

// PushDemo serves the demo page under PushDemoPrefix. The service worker
// lives under the prefix, so its scope is the prefix and it controls no
// other page of the origin.
func PushDemo() http.Handler {
	assets := map[string]asset{}
	for name, file := range pushDemoFile {
		b, err := pushDemoFiles.ReadFile("pushdemo/" + file)
		if err != nil {
			panic(err) // only a broken build
		}
		assets[name] = newAsset(file, b)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[strings.TrimPrefix(r.URL.Path, PushDemoPrefix)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Type", a.contentType)
		// A developer's page: always the build's files, never a cached
		// service worker from an older binary.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(a.body)
	})
}
