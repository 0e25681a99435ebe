package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed static
var files embed.FS

// CSP is the Content-Security-Policy of every dashboard response: scripts,
// styles, fetches and images from this origin only (images also as data:
// URLs), no framing, no <base>, forms posting only here.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Modes of the page (index.html's data-mode): the operator's dashboard, or
// the consumer portal, the same modules confined to one tenant's pages
// (ADR 0015).
const (
	ModeOperator = "operator"
	ModePortal   = "portal"
)

// assetsDir is the sub-path (under the prefix) the embedded files are served
// from; every other path under the prefix is a client-side route.
const assetsDir = "assets/"

// contentTypes pins the types of the extensions the dashboard uses, so they
// do not depend on the host's mime tables (an ES module served as
// text/plain is refused by the browser under nosniff).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".json": "application/json",
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the dashboard. Mount it at prefix (with its trailing
// slash, e.g. "/ui/"): files are served from prefix+"assets/…" with a
// content-hash ETag and revalidation, and any other GET under prefix gets
// index.html, whose router draws the page for the path.
type Handler struct {
	prefix string
	assets map[string]asset
	index  asset
	// csp is CSP, with the portal's frame-ancestors.
	csp string
	// framed is true when some origin may embed the pages (no
	// X-Frame-Options: DENY then).
	framed bool
}

// New returns the dashboard handler for prefix ("/ui/" when empty). It
// panics if the embedded files are unreadable, which only a broken build
// can cause.
func New(prefix string) *Handler {
	return newHandler(prefix, ModeOperator, nil)
}

// NewPortal returns the consumer portal's handler for prefix ("/portal/"
// when empty): the dashboard's files in portal mode. frameAncestors are
// the origins (or 'self') that may embed it in an iframe — the CSP's
// frame-ancestors; none means no framing, like /ui/. The caller validates
// them (herald serve accepts only origins).
func NewPortal(prefix string, frameAncestors []string) *Handler {
	if prefix == "" {
		prefix = "/portal/"
	}
	return newHandler(prefix, ModePortal, frameAncestors)
}

func newHandler(prefix, mode string, frameAncestors []string) *Handler {
	if prefix == "" {
		prefix = "/ui/"
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	h := &Handler{prefix: prefix, assets: map[string]asset{}, csp: CSP}
	if len(frameAncestors) > 0 {
		h.csp = strings.Replace(CSP, "frame-ancestors 'none'", "frame-ancestors "+strings.Join(frameAncestors, " "), 1)
		h.framed = true
	}
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err)
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		if p == "index.html" {
			// The prefix is written into the page's links and its
			// module's URL (the CSP forbids <base>).
			b = bytes.ReplaceAll(b, []byte("{{PREFIX}}"), []byte(prefix))
			b = bytes.ReplaceAll(b, []byte("{{MODE}}"), []byte(mode))
		}
		h.assets[p] = newAsset(p, b)
		return nil
	})
	if err != nil {
		panic(err)
	}
	h.index = h.assets["index.html"]
	return h
}

func newAsset(name string, b []byte) asset {
	sum := sha256.Sum256(b)
	ct := contentTypes[path.Ext(name)]
	if ct == "" {
		ct = mime.TypeByExtension(path.Ext(name))
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	return asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// securityHeaders sets the headers every response of h carries.
func (h *Handler) securityHeaders(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if !h.framed {
		// For browsers without CSP frame-ancestors; one that may be
		// framed relies on the CSP alone (X-Frame-Options cannot list
		// origins).
		hd.Set("X-Frame-Options", "DENY")
	}
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// ServeHTTP serves an asset, or index.html for a client-side route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.securityHeaders(w)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, h.prefix)
	if !ok {
		if r.URL.Path+"/" == h.prefix {
			http.Redirect(w, r, h.prefix, http.StatusMovedPermanently)
			return
		}
		http.NotFound(w, r)
		return
	}
	a := h.index
	if name, isAsset := strings.CutPrefix(rest, assetsDir); isAsset {
		found, ok := h.assets[name]
		if !ok || name == "index.html" {
			http.NotFound(w, r)
			return
		}
		a = found
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	// Revalidate every time: the ETag makes that a 304 without a body,
	// and a new binary's files are picked up at once.
	w.Header().Set("Cache-Control", "no-cache")
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(a.body)
	}
}

func etagMatches(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "W/"))
		if v == etag || v == "*" {
			return true
		}
	}
	return false
}

// Redirect answers 302 to the dashboard; herald serve mounts it at GET /
// so a browser opening the server's root lands on the dashboard.
func Redirect(prefix string) http.Handler {
	if prefix == "" {
		prefix = "/ui/"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, prefix, http.StatusFound)
	})
}
