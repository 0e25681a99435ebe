package openapi

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"strings"
)

// document is openapi.json, the source of truth.
//
//go:embed openapi.json
var document []byte

// etag is a strong validator of the document: it changes only with a new
// binary, so clients may cache the document and revalidate cheaply.
var etag = func() string {
	sum := sha256.Sum256(document)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// Document returns the OpenAPI document (JSON). Callers must not modify it.
func Document() []byte { return document }

// Handler serves the document at GET /openapi.json: application/json with
// an ETag, 304 on a matching If-None-Match. It needs no auth: the document
// describes the API, it holds no data.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("ETag", etag)
		// no-cache: a browser or the dashboard revalidates every time (a
		// 304 is cheap), so an upgraded server is seen at once.
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(document)
		}
	})
}

// etagMatches implements If-None-Match's weak comparison (RFC 9110 13.1.2):
// "*" or any listed tag equal to tag, W/ prefixes ignored.
func etagMatches(header, tag string) bool {
	for len(header) > 0 {
		var item string
		item, header, _ = strings.Cut(header, ",")
		item = strings.TrimSpace(item)
		if item == "*" {
			return true
		}
		item = strings.TrimPrefix(item, "W/")
		if item == tag {
			return true
		}
	}
	return false
}
