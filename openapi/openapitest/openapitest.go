package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/heraldhq/herald/openapi"
)

// Validator checks requests and answers against one loaded document.
type Validator struct {
	doc *openapi3.T
	// mux routes a request to its documented operation: the document's
	// paths turned back into ServeMux patterns, so that routing follows
	// the same rules as the servers' own muxes.
	mux *http.ServeMux
}

var (
	loadOnce sync.Once
	loaded   *Validator
	loadErr  error
)

// Default returns the Validator of the embedded document, loaded and
// validated once per test binary.
func Default() (*Validator, error) {
	loadOnce.Do(func() { loaded, loadErr = New(openapi.Document()) })
	return loaded, loadErr
}

// New loads and validates doc (JSON) and returns its Validator.
func New(doc []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	d, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("openapitest: loading the document: %w", err)
	}
	if err := d.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapitest: invalid document: %w", err)
	}
	v := &Validator{doc: d, mux: http.NewServeMux()}
	for path, item := range d.Paths.Map() {
		for method, op := range item.Operations() {
			route := &routers.Route{Spec: d, Path: path, PathItem: item, Method: method, Operation: op}
			pattern := method + " " + Pattern(path, params(item, op))
			v.mux.Handle(pattern, routeHandler{route})
		}
	}
	return v, nil
}

// Pattern turns an OpenAPI path into the ServeMux pattern (without
// method) that serves it: "/" is "/{$}", and a parameter marked
// "x-herald-multi-segment" becomes "{name...}". It is the inverse of
// the mapping the drift test applies to the servers' patterns.
func Pattern(path string, multi map[string]bool) string {
	if path == "/" {
		return "/{$}"
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			if multi[name] {
				segs[i] = "{" + name + "...}"
			}
		}
	}
	return strings.Join(segs, "/")
}

// params returns the names of the multi-segment path parameters.
func params(item *openapi3.PathItem, op *openapi3.Operation) map[string]bool {
	multi := map[string]bool{}
	for _, list := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, p := range list {
			if p.Value != nil && p.Value.In == "path" && p.Value.Extensions["x-herald-multi-segment"] == true {
				multi[p.Value.Name] = true
			}
		}
	}
	return multi
}

// routeHandler records which operation the mux chose and its path values.
type routeHandler struct{ route *routers.Route }

type match struct {
	route  *routers.Route
	params map[string]string
}

type matchKey struct{}

func (h routeHandler) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	m := r.Context().Value(matchKey{}).(*match)
	m.route = h.route
	m.params = map[string]string{}
	for _, p := range h.route.PathItem.Parameters {
		m.params[p.Value.Name] = r.PathValue(p.Value.Name)
	}
	for _, p := range h.route.Operation.Parameters {
		if p.Value.In == "path" {
			m.params[p.Value.Name] = r.PathValue(p.Value.Name)
		}
	}
}

// find returns the documented operation req calls, or nil.
func (v *Validator) find(req *http.Request) *match {
	m := &match{}
	probe := req.Clone(context.WithValue(req.Context(), matchKey{}, m))
	probe.Body = http.NoBody
	if _, pattern := v.mux.Handler(probe); pattern == "" {
		return nil
	}
	v.mux.ServeHTTP(httptest.NewRecorder(), probe)
	return m
}

// authenticate accepts what the servers could: a bearer token must be
// present (whether it is valid is the server's business: a wrong one is
// answered 401, which the document lists); VAPID is checked by the push
// service itself.
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	switch in.SecuritySchemeName {
	case "bearer":
		scheme, token, ok := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return errors.New("no bearer token")
		}
	}
	return nil
}

// Check validates req, whose body was reqBody (nil for none), and the
// answer: status, header and body. See the package comment for the rule.
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	m := v.find(req)
	if m == nil {
		v1 := req.URL.Path == "/v1" || strings.HasPrefix(req.URL.Path, "/v1/")
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed && !(v1 && status == http.StatusUnauthorized) {
			return fmt.Errorf("%s %s is no documented operation, yet it was answered %d", req.Method, req.URL.Path, status)
		}
		return v.errorBody(body)
	}
	ctx := req.Context()
	r := req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	if reqBody == nil {
		r.Body = http.NoBody
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    authenticate,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: m.params, Route: m.route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if reqErr != nil && (status < 400 || status > 499) {
		return fmt.Errorf("%s %s: the document refuses the request, yet it was answered %d: %w",
			req.Method, req.URL.Path, status, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: opts}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("%s %s answered %d %s: the answer does not match the document: %w",
			req.Method, req.URL.Path, status, truncate(body), err)
	}
	return nil
}

// errorBody checks body against the document's error schemas.
func (v *Validator) errorBody(body []byte) error {
	var errs []error
	for _, name := range []string{"Error", "PushError"} {
		s := v.doc.Components.Schemas[name]
		var value any
		if err := json.Unmarshal(body, &value); err != nil {
			return fmt.Errorf("error answer is not JSON: %w (%s)", err, truncate(body))
		}
		err := s.Value.VisitJSON(value, openapi3.EnableJSONSchema2020())
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	return fmt.Errorf("error answer %s matches no error schema: %w", truncate(body), errors.Join(errs...))
}

func truncate(b []byte) string {
	const max = 500
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// CheckWebhook validates a request herald sent to a subscription (its
// headers and body) against the document's webhooks: event operation. The
// document describes it as POST; a PUT subscription sends the same request.
func (v *Validator) CheckWebhook(req *http.Request, body []byte) error {
	item := v.doc.Webhooks["event"]
	if item == nil || item.Post == nil {
		return errors.New("openapitest: the document has no webhooks: event: post")
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	route := &routers.Route{Spec: v.doc, Path: "event", PathItem: item, Method: http.MethodPost, Operation: item.Post}
	in := &openapi3filter.RequestValidationInput{Request: r, Route: route, Options: &openapi3filter.Options{MultiError: true}}
	if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
		return fmt.Errorf("webhook request %s does not match the document: %w", truncate(body), err)
	}
	return nil
}
