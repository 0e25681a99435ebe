package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// Subscriptions: the body decoder with each field's rules, the view, the
// handlers of /v1/subscriptions and /v1/subscriptions/{id}, and the test
// event (POST /v1/subscriptions/{id}/test). Secrets: subscription_secret.go.

// Subscription limits. Ranges not fixed by docs/api.md are generous bounds that
// keep one subscription from holding unbounded data or a nonsense schedule.
const (
	maxURLBytes         = 2048
	maxEventTypes       = 100
	maxDescription      = 1024 // characters
	maxHeaders          = 50
	maxHeaderNameBytes  = 256
	maxHeaderValueBytes = 4096
	maxTimeoutMS        = int64(herald.MaxTimeout / time.Millisecond) // 300000
	maxKeyIntervalMS    = 24 * 60 * 60 * 1000                         // one day
	maxRateLimitPer     = 24 * 60 * 60                                // one day, in seconds
	maxRateLimitMax     = 1_000_000
	maxMaxInFlight      = 100_000
	maxSecretGraceS     = 30 * 24 * 60 * 60 // 30 days
	disabledByAPI       = "disabled by API"
	defaultTimeoutMS    = int64(herald.DefaultTimeout / time.Millisecond)
)

// subscriptionFields are the keys a subscription body may have.
var subscriptionFields = []string{
	"url", "method", "destination", "event_types", "filter", "secret", "headers", "ordering", "key_interval_ms",
	"rate_limit", "max_in_flight", "timeout_ms", "description", "metadata", "state",
	"tenant", "all_tenants", "auto_disable",
}

// readOnlySubscriptionFields appear in answers but cannot be patched.
// tenant and all_tenants are fixed at creation: moving a subscription
// between tenants would hand its history to another customer.
var readOnlySubscriptionFields = []string{"id", "created_at", "updated_at", "disabled_reason", "secret", "tenant", "all_tenants", "health"}

// subscriptionInput is a decoded and validated subscription body.
type subscriptionInput struct {
	// sub has every field the body can set, defaults applied; ID, state
	// and timestamps are left to the caller.
	sub herald.Subscription
	// secret is the body's secret, "" when it has none.
	secret string
	// state is the body's state, "" when it has none.
	state herald.SubscriptionState
}

// decodeSubscription decodes and validates a subscription body with the
// default rules. Every error is a *herald.Error naming the JSON path at
// fault.
func decodeSubscription(body []byte) (*subscriptionInput, error) {
	return decodeSubscriptionRules(body, subscriptionRules{})
}

// decodeSubscriptionRules is decodeSubscription with the server's rules.
func decodeSubscriptionRules(body []byte, rules subscriptionRules) (*subscriptionInput, error) {
	o, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	return subscriptionFromObject(o, rules)
}

func subscriptionFromObject(o object, rules subscriptionRules) (*subscriptionInput, error) {
	if err := o.allow(subscriptionFields...); err != nil {
		return nil, err
	}
	in := &subscriptionInput{sub: herald.Subscription{
		Method:     "POST",
		EventTypes: []string{},
		Headers:    map[string]string{},
		Ordering:   herald.OrderingNone,
		TimeoutMS:  defaultTimeoutMS,
		Metadata:   json.RawMessage("{}"),
	}}
	s := &in.sub
	steps := []func() error{
		func() error { return decodeDestination(o, s, rules) },
		func() error { return decodeEventTypes(o, s) },
		func() error { return decodeFilter(o, s) },
		func() error { return decodeSecret(o, in) },
		func() error { return decodeHeaders(o, s) },
		func() error { return decodeOrdering(o, s) },
		func() error { return decodeRateLimit(o, s) },
		func() error { return decodeLimits(o, s) },
		func() error { return decodeDescription(o, s) },
		func() error { return decodeMetadata(o, s) },
		func() error { return decodeState(o, in) },
		func() error { return decodeTenancy(o, s) },
		func() error { return decodeAutoDisable(o, s) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// decodeURL: required, absolute http(s) with a host. Where it points is not
// checked here: the SSRF guard runs at dial time, after DNS.
func decodeURL(o object, s *herald.Subscription) error {
	set, err := o.str("url", &s.URL)
	if err != nil {
		return err
	}
	if !set || s.URL == "" {
		return herald.FieldErrorf(herald.CodeMissingField, "url", "url is required")
	}
	return checkWebhookURL("url", s)
}

// checkWebhookURL checks s.URL, named path in errors.
func checkWebhookURL(path string, s *herald.Subscription) error {
	if s.URL == "" {
		return herald.FieldErrorf(herald.CodeMissingField, path, "%s is required", path)
	}
	if len(s.URL) > maxURLBytes {
		return invalid(path, "must be at most %d bytes, got %d", maxURLBytes, len(s.URL))
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return invalid(path, "is not a valid URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return invalid(path, "must be an absolute http or https URL")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return invalid(path, "must name a host (https://host/path)")
	}
	return nil
}

func decodeMethod(o object, s *herald.Subscription) error {
	if _, err := o.str("method", &s.Method); err != nil {
		return err
	}
	return checkMethod("method", s)
}

// checkMethod upper-cases s.Method and checks it, named path in errors.
func checkMethod(path string, s *herald.Subscription) error {
	s.Method = strings.ToUpper(s.Method)
	if s.Method != "POST" && s.Method != "PUT" {
		return invalid(path, "must be POST or PUT")
	}
	return nil
}

func decodeEventTypes(o object, s *herald.Subscription) error {
	types, set, err := o.stringList("event_types")
	if err != nil || !set {
		return err
	}
	if len(types) > maxEventTypes {
		return invalid("event_types", "may hold at most %d patterns, got %d", maxEventTypes, len(types))
	}
	for i, p := range types {
		if err := herald.CheckEventTypePattern(p); err != nil {
			return invalid(fmt.Sprintf("event_types[%d]", i), "%s", err)
		}
	}
	s.EventTypes = types
	return nil
}

// decodeFilter decodes the filter and compiles it, so a filter that would
// never match (or never run) is refused at the door with the compiler's
// message.
func decodeFilter(o object, s *herald.Subscription) error {
	raw, ok := o.get("filter")
	if !ok {
		return nil
	}
	fo, err := parseObject(raw, "filter")
	if err != nil {
		return err
	}
	if err := fo.allow("cel", "jmespath", "es_query"); err != nil {
		return err
	}
	f := &herald.Filter{}
	if _, err := fo.str("cel", &f.CEL); err != nil {
		return err
	}
	if _, err := fo.str("jmespath", &f.JMESPath); err != nil {
		return err
	}
	if q, ok := fo.get("es_query"); ok {
		var buf bytes.Buffer
		if err := json.Compact(&buf, q); err != nil {
			return invalid("filter.es_query", "is not valid JSON")
		}
		f.ESQuery = buf.Bytes()
	}
	if f.IsZero() {
		return nil
	}
	if _, err := filter.Compile(f); err != nil {
		var he *herald.Error
		if errors.As(err, &he) && he.Code == herald.CodeInvalidFilter {
			return err
		}
		return &herald.Error{Code: herald.CodeInvalidFilter, Field: "filter", Message: err.Error(), Err: err}
	}
	s.Filter = f
	return nil
}

func decodeSecret(o object, in *subscriptionInput) error {
	set, err := o.str("secret", &in.secret)
	if err != nil || !set {
		return err
	}
	if err := webhook.ValidSecret(in.secret); err != nil {
		// ValidSecret's message never contains the secret.
		return &herald.Error{Code: herald.CodeInvalidField, Field: "secret", Err: err,
			Message: "secret is invalid (want \"whsec_\" + base64 of 24 to 64 bytes): " + err.Error()}
	}
	return nil
}

func decodeHeaders(o object, s *herald.Subscription) error {
	raw, ok := o.get("headers")
	if !ok {
		return nil
	}
	ho, err := parseObject(raw, "headers")
	if err != nil {
		return err
	}
	if len(ho.fields) > maxHeaders {
		return invalid("headers", "may hold at most %d headers, got %d", maxHeaders, len(ho.fields))
	}
	names := make([]string, 0, len(ho.fields))
	for name := range ho.fields {
		names = append(names, name)
	}
	slices.Sort(names)
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		path := ho.at(name)
		var value string
		set, err := ho.str(name, &value)
		if err != nil {
			return err
		}
		if !set {
			return typeError(path, "a string", ho.fields[name])
		}
		if err := validHeader(name, value); err != nil {
			return invalid(path, "%s", err)
		}
		lower := strings.ToLower(name)
		if seen[lower] {
			return invalid(path, "repeats a header name (names are case-insensitive)")
		}
		seen[lower] = true
		s.Headers[name] = value
	}
	return nil
}

func validHeader(name, value string) error {
	if name == "" || len(name) > maxHeaderNameBytes {
		return fmt.Errorf("name must be 1 to %d bytes", maxHeaderNameBytes)
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return errors.New("name is not a valid HTTP header name")
		}
	}
	// The sender's own list, so the API refuses exactly what it would
	// drop: herald's headers (content-type, webhook-*, herald-*) and those
	// of the transport (host, content-length, connection, expect,
	// proxy-*, ...).
	if webhook.ReservedHeader(name) {
		return fmt.Errorf("is reserved: herald sets %s itself or it controls the connection", strings.ToLower(name))
	}
	if len(value) > maxHeaderValueBytes {
		return fmt.Errorf("value must be at most %d bytes", maxHeaderValueBytes)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return errors.New("value must not contain control characters (CR, LF, NUL …)")
		}
	}
	return nil
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110 5.6.2).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func decodeOrdering(o object, s *herald.Subscription) error {
	var v string
	set, err := o.str("ordering", &v)
	if err != nil || !set {
		return err
	}
	if !herald.Ordering(v).Valid() {
		return invalid("ordering", "must be none, fifo or latest")
	}
	s.Ordering = herald.Ordering(v)
	return nil
}

func decodeRateLimit(o object, s *herald.Subscription) error {
	raw, ok := o.get("rate_limit")
	if !ok {
		return nil
	}
	ro, err := parseObject(raw, "rate_limit")
	if err != nil {
		return err
	}
	if err := ro.allow("max", "per_seconds"); err != nil {
		return err
	}
	var maxN, per int64
	for _, f := range []struct {
		name     string
		dst      *int64
		min, max int64
	}{{"max", &maxN, 1, maxRateLimitMax}, {"per_seconds", &per, 1, maxRateLimitPer}} {
		set, err := ro.integer(f.name, f.dst)
		if err != nil {
			return err
		}
		if !set {
			return herald.FieldErrorf(herald.CodeMissingField, ro.at(f.name), "%s is required", ro.at(f.name))
		}
		if *f.dst < f.min || *f.dst > f.max {
			return invalid(ro.at(f.name), "must be from %d to %d", f.min, f.max)
		}
	}
	s.RateLimit = &herald.RateLimit{Max: int(maxN), PerSeconds: int(per)}
	return nil
}

// decodeLimits decodes the integer knobs.
func decodeLimits(o object, s *herald.Subscription) error {
	var maxInFlight int64
	for _, f := range []struct {
		name     string
		dst      *int64
		min, max int64
	}{
		{"key_interval_ms", &s.KeyIntervalMS, 0, maxKeyIntervalMS},
		{"max_in_flight", &maxInFlight, 0, maxMaxInFlight},
		{"timeout_ms", &s.TimeoutMS, 1, maxTimeoutMS},
	} {
		set, err := o.integer(f.name, f.dst)
		if err != nil {
			return err
		}
		if set && (*f.dst < f.min || *f.dst > f.max) {
			return invalid(f.name, "must be from %d to %d", f.min, f.max)
		}
	}
	s.MaxInFlight = int(maxInFlight)
	return nil
}

func decodeDescription(o object, s *herald.Subscription) error {
	if _, err := o.str("description", &s.Description); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(s.Description); n > maxDescription {
		return invalid("description", "must be at most %d characters, got %d", maxDescription, n)
	}
	// Line breaks and tabs are fine in a description; other control
	// characters (NUL, escape sequences) are not.
	if strings.IndexFunc(s.Description, func(r rune) bool {
		return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
	}) >= 0 {
		return invalid("description", "must not contain control characters other than tab and line breaks")
	}
	return nil
}

func decodeMetadata(o object, s *herald.Subscription) error {
	raw, ok := o.get("metadata")
	if !ok {
		return nil
	}
	if raw[0] != '{' {
		return typeError("metadata", "an object", raw)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return typeError("metadata", "an object", raw)
	}
	s.Metadata = buf.Bytes()
	return nil
}

// decodeTenancy: tenant is a tenant id (herald.ValidTenant); all_tenants
// is allowed only on an untenanted subscription.
func decodeTenancy(o object, s *herald.Subscription) error {
	set, err := o.str("tenant", &s.Tenant)
	if err != nil {
		return err
	}
	if set && !herald.ValidTenant(s.Tenant) {
		return invalid("tenant", "must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", herald.MaxTenantLen)
	}
	if raw, ok := o.get("all_tenants"); ok {
		if err := json.Unmarshal(raw, &s.AllTenants); err != nil {
			return typeError("all_tenants", "a boolean", raw)
		}
	}
	if s.AllTenants && s.Tenant != "" {
		return invalid("all_tenants", "is only allowed on a subscription without a tenant")
	}
	return nil
}

func decodeState(o object, in *subscriptionInput) error {
	var v string
	set, err := o.str("state", &v)
	if err != nil || !set {
		return err
	}
	switch st := herald.SubscriptionState(v); st {
	case herald.SubscriptionEnabled, herald.SubscriptionDisabled:
		in.state = st
		return nil
	}
	return invalid("state", "must be enabled or disabled")
}

// subscriptionJSON is a subscription as the API shows it. Optional objects
// are null rather than absent so clients see every field.
type subscriptionJSON struct {
	ID string `json:"id"`
	// URL and Method are a webhook's (absent for other types), kept
	// beside Destination for clients older than destinations.
	URL            string                   `json:"url,omitempty"`
	Method         string                   `json:"method,omitempty"`
	Destination    destinationJSON          `json:"destination"`
	EventTypes     []string                 `json:"event_types"`
	Filter         *herald.Filter           `json:"filter"`
	Secret         string                   `json:"secret,omitempty"`
	Headers        map[string]string        `json:"headers"`
	Ordering       herald.Ordering          `json:"ordering"`
	KeyIntervalMS  int64                    `json:"key_interval_ms"`
	RateLimit      *herald.RateLimit        `json:"rate_limit"`
	MaxInFlight    int                      `json:"max_in_flight"`
	TimeoutMS      int64                    `json:"timeout_ms"`
	Description    string                   `json:"description"`
	Metadata       json.RawMessage          `json:"metadata"`
	State          herald.SubscriptionState `json:"state"`
	DisabledReason string                   `json:"disabled_reason"`
	Tenant         string                   `json:"tenant,omitempty"`
	AllTenants     bool                     `json:"all_tenants,omitempty"`
	// AutoDisable is absent for the server's rule, null for never.
	AutoDisable json.RawMessage `json:"auto_disable,omitempty"`
	// Health is shown by GET /v1/subscriptions/{id} only.
	Health    *healthJSON `json:"health,omitempty"`
	CreatedAt string      `json:"created_at"`
	UpdatedAt string      `json:"updated_at"`
}

// subscriptionView renders s; secret is shown only when not empty (create).
// Unset fields show their effective defaults, so what a client reads back
// is also a valid body to send.
func subscriptionView(s *herald.Subscription, secret string) subscriptionJSON {
	v := subscriptionJSON{
		ID: s.ID, URL: s.URL, Method: s.Method, EventTypes: s.EventTypes, Secret: secret,
		Headers: s.Headers, Ordering: s.Ordering, KeyIntervalMS: s.KeyIntervalMS, RateLimit: s.RateLimit,
		MaxInFlight: s.MaxInFlight, TimeoutMS: s.Timeout().Milliseconds(), Description: s.Description,
		Metadata: s.Metadata, State: s.State, DisabledReason: s.DisabledReason,
		Tenant: s.Tenant, AllTenants: s.AllTenants, AutoDisable: autoDisableView(s.AutoDisable),
		CreatedAt: timestamp(s.CreatedAt), UpdatedAt: timestamp(s.UpdatedAt),
	}
	if !s.Filter.IsZero() {
		v.Filter = s.Filter
	}
	if s.Dest().Type == herald.DestinationWebhook {
		if v.Method == "" {
			v.Method = "POST"
		}
	} else {
		v.URL, v.Method = "", ""
	}
	v.Destination = destinationView(s, v.Method)
	if v.EventTypes == nil {
		v.EventTypes = []string{}
	}
	if v.Headers == nil {
		v.Headers = map[string]string{}
	}
	if v.Ordering == "" {
		v.Ordering = herald.OrderingNone
	}
	if len(v.Metadata) == 0 || isNull(v.Metadata) {
		v.Metadata = json.RawMessage("{}")
	}
	return v
}

func (s *server) subscriptionCreate(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	in, err := decodeSubscriptionRules(body, s.rules())
	if err != nil {
		return err
	}
	if own := principalOf(r).Tenant; own != "" {
		if in.sub.Tenant != "" && in.sub.Tenant != own {
			return errOtherTenant(own)
		}
		if in.sub.AllTenants {
			return herald.Errorf(herald.CodeForbidden, "a token confined to a tenant cannot create an all_tenants subscription")
		}
		in.sub.Tenant = own
	}
	if err := s.checkDestinationConnection(r.Context(), &in.sub); err != nil {
		return err
	}
	secret := in.secret
	if secret == "" {
		secret = webhook.NewSecret()
	}
	now := s.now()
	sub := in.sub
	sub.ID = herald.NewID(herald.PrefixSubscription)
	sub.State = herald.SubscriptionEnabled
	if in.state == herald.SubscriptionDisabled {
		sub.State, sub.DisabledReason = herald.SubscriptionDisabled, disabledByAPI
	}
	sub.CreatedAt, sub.UpdatedAt = now, now
	created, err := s.store.SubscriptionCreate(r.Context(), &store.SubscriptionCreateParams{
		Subscription: &sub, Secret: secret, Now: now,
	})
	if err != nil {
		return err
	}
	noStore(w)
	w.Header().Set("Location", "/v1/subscriptions/"+created.ID)
	return s.reply(w, http.StatusCreated, subscriptionView(created, secret))
}

func (s *server) subscriptionList(w http.ResponseWriter, r *http.Request) error {
	p, err := pageParams(r, herald.PrefixSubscription)
	if err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	tenant, err := tenantFilter(r, q)
	if err != nil {
		return err
	}
	res, err := s.store.SubscriptionList(r.Context(), &store.SubscriptionListParams{Limit: p.limit, After: p.key, Tenant: tenant})
	if err != nil {
		return err
	}
	out := listJSON[subscriptionJSON]{Data: make([]subscriptionJSON, len(res.Subscriptions))}
	for i, sub := range res.Subscriptions {
		out.Data[i] = subscriptionView(receiverAsSeenBy(r, sub), "")
	}
	if n := len(res.Subscriptions); n > 0 {
		out.NextCursor = nextCursor(res.More, res.Subscriptions[n-1].ID)
	}
	return s.reply(w, http.StatusOK, out)
}

func (s *server) subscriptionGet(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.visibleSubscription(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	h, err := s.store.SubscriptionHealthGet(r.Context(), &store.SubscriptionHealthGetParams{ID: sub.ID, Now: s.now()})
	if err != nil {
		return err
	}
	v := subscriptionView(receiverAsSeenBy(r, sub), "")
	v.Health = healthView(h, s.autoDisableRule(sub))
	return s.reply(w, http.StatusOK, v)
}

// subscriptionPatch applies a JSON merge patch (RFC 7396) to the current
// subscription and validates the result as a whole, exactly like a create
// body: a patch cannot produce a subscription a create would refuse. One
// deviation from RFC 7396: "filter" is replaced, not merged, because it
// holds exactly one kind and merging {"jmespath": …} into a CEL filter
// could only fail.
//
// Two concurrent patches of one subscription are last-writer-wins.
func (s *server) subscriptionPatch(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	patch, err := parseBody(body)
	if err != nil {
		return err
	}
	for _, f := range readOnlySubscriptionFields {
		if patch.has(f) {
			msg := "%s cannot be changed"
			if f == "secret" {
				msg += "; rotate it with POST /v1/subscriptions/{id}/secret/rotate"
			}
			return herald.FieldErrorf(herald.CodeInvalidField, f, msg, f)
		}
	}
	if err := patch.allow(subscriptionFields...); err != nil {
		return err
	}
	cur, err := s.visibleSubscription(r, id)
	if err != nil {
		return err
	}
	merged, err := mergeSubscription(cur, body)
	if err != nil {
		return err
	}
	in, err := decodeSubscriptionRules(merged, s.rules())
	if err != nil {
		return err
	}
	upd := in.sub
	upd.ID, upd.CreatedAt = cur.ID, cur.CreatedAt
	upd.Tenant, upd.AllTenants = cur.Tenant, cur.AllTenants
	// The connection is checked when the destination moves to it, not on
	// every patch: an admin who revokes a grant later leaves existing
	// subscriptions editable (their deliveries fail until it is restored).
	if nd, cd := upd.Dest(), cur.Dest(); nd.Type != cd.Type || nd.Connection != cd.Connection {
		if err := s.checkDestinationConnection(r.Context(), &upd); err != nil {
			return err
		}
	}
	upd.State, upd.DisabledReason = cur.State, cur.DisabledReason
	switch in.state {
	case herald.SubscriptionEnabled:
		upd.State, upd.DisabledReason = herald.SubscriptionEnabled, ""
	case herald.SubscriptionDisabled:
		// Keep the reason of an earlier disable (e.g. a 410 from the
		// endpoint): it says more than "disabled by API".
		if cur.State != herald.SubscriptionDisabled {
			upd.State, upd.DisabledReason = herald.SubscriptionDisabled, disabledByAPI
		}
	}
	now := s.now()
	upd.UpdatedAt = now
	res, err := s.store.SubscriptionUpdate(r.Context(), &store.SubscriptionUpdateParams{Subscription: &upd, Now: now})
	if err != nil {
		return notFound(err, "subscription", id)
	}
	if upd.Dest().Type != herald.DestinationListen {
		s.dropListener(id)
	}
	return s.reply(w, http.StatusOK, subscriptionView(res, ""))
}

// mergeSubscription applies the merge patch body to cur and returns the
// merged document, ready for decodeSubscription.
func mergeSubscription(cur *herald.Subscription, body []byte) ([]byte, error) {
	curJSON, err := marshalVerbatim(subscriptionView(cur, ""))
	if err != nil {
		return nil, err
	}
	var doc, patch map[string]any
	if err := decodeNumbers(curJSON, &doc); err != nil {
		return nil, err
	}
	if err := decodeNumbers(body, &patch); err != nil {
		return nil, &herald.Error{Code: herald.CodeInvalidJSON, Message: "malformed JSON", Err: err}
	}
	for _, f := range readOnlySubscriptionFields {
		delete(doc, f)
	}
	mergeDestination(doc, patch)
	for k, v := range patch {
		switch {
		case k == "destination":
			// merged by mergeDestination
		case v == nil && k != "auto_disable":
			delete(doc, k)
		case k == "filter", k == "auto_disable":
			// Replaced whole; auto_disable's null means never.
			doc[k] = v
		default:
			doc[k] = mergePatch(doc[k], v)
		}
	}
	return marshalVerbatim(doc)
}

// marshalVerbatim is json.Marshal without HTML escaping: json.Marshal
// rewrites "&", "<" and ">" inside strings (and inside a RawMessage such as
// an es_query filter) as \u0026…, so a PATCH that does not touch the
// filter would still store it with different bytes than were given.
func marshalVerbatim(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeNumbers unmarshals keeping numbers as json.Number, so that a merge
// neither rounds large integers nor turns 5 into 5.0.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// mergePatch is RFC 7396 MergePatch(target, patch).
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	out := make(map[string]any, len(t)+len(p))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

func (s *server) subscriptionDelete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.confineSubscription(r, id); err != nil {
		return err
	}
	err := s.store.SubscriptionDelete(r.Context(), &store.SubscriptionDeleteParams{ID: id, Now: s.now()})
	if err != nil {
		return notFound(err, "subscription", id)
	}
	s.dropListener(id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// TestEventType is the type of the events POST /v1/subscriptions/{id}/test
// sends: in herald's reserved namespace, so no producer event is mistaken
// for one.
const TestEventType = "herald.test"

// subscriptionTest answers POST /v1/subscriptions/{id}/test: an event of
// type herald.test stored with one delivery, to this subscription only,
// whatever its event types and filter. It goes through the queue like any
// delivery (tier 0's delay, throttles, a disabled subscription waits).
func (s *server) subscriptionTest(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	data := json.RawMessage(nil)
	if len(strings.TrimSpace(string(body))) > 0 {
		o, err := parseBody(body)
		if err != nil {
			return err
		}
		if err := o.allow("data"); err != nil {
			return err
		}
		data, _ = o.get("data")
	}
	sub, err := s.visibleSubscription(r, id)
	if err != nil {
		return err
	}
	now := s.now()
	if data == nil {
		data, _ = json.Marshal(map[string]any{
			"message": "test event sent from herald", "subscription_id": sub.ID, "sent_at": timestamp(now),
		})
	}
	ev := &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: TestEventType, Data: data, CreatedAt: now, Tenant: sub.Tenant}
	dlv := herald.NewID(herald.PrefixDelivery)
	var tier0 time.Duration
	if len(s.cfg.Tiers) > 0 {
		tier0 = s.cfg.Tiers[0]
	}
	res, err := s.store.EventInsertMany(r.Context(), &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
		Event:      ev,
		Deliveries: []store.DeliveryInsert{{ID: dlv, SubscriptionID: sub.ID, NextAttemptAt: now.Add(tier0)}},
	}}})
	if err != nil {
		return err
	}
	if len(res) != 1 || res[0].DeliveryCount != 1 {
		// The subscription was deleted between the read and the insert.
		return herald.NotFoundf("subscription %s not found", quote(id))
	}
	s.notify()
	return s.reply(w, http.StatusAccepted, struct {
		EventID    string `json:"event_id"`
		DeliveryID string `json:"delivery_id"`
	}{ev.ID, dlv})
}
