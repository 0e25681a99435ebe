// Package ui is herald's web dashboard: static HTML, CSS and native ES
// modules embedded in the binary and served by a plain http.Handler that
// can be mounted under a path prefix (herald serve mounts it at /ui/).
//
// The dashboard is a client of the public /v1 API only: it signs in with an
// API token kept in the browser's sessionStorage and sends it as a bearer
// token, so every change it makes is a request an operator could make with
// curl. The handler itself serves files and nothing else; it needs no store
// and no token.
//
// There is no build step (see docs/adr/0012-dashboard.md): the files under
// static/ are the files the browser runs. Every response carries a strict
// Content-Security-Policy (no inline script or style, no third-party
// origin), so the assets must never reference another origin.
package ui
