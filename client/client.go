package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds one request when Client.HTTP is nil (30 s: a
// redrive of 10,000 dead letters is the slowest call).
const DefaultTimeout = 30 * time.Second

// maxErrorBody caps how much of an error answer is read (64 KiB): error
// bodies are small, and a proxy's HTML page need not be read whole.
const maxErrorBody = 64 << 10

// Client calls one herald server. The zero value is not usable; use New.
type Client struct {
	// BaseURL is the server's root, e.g. http://127.0.0.1:8080.
	BaseURL string
	// Token is sent as "Authorization: Bearer <Token>" when not empty.
	Token string
	// HTTP is the client requests go through (default: one with
	// DefaultTimeout).
	HTTP *http.Client
	// UserAgent is sent when not empty.
	UserAgent string
}

// New returns a client of the server at baseURL (a trailing slash is
// ignored) authenticating with token.
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{Timeout: DefaultTimeout}}
}

// do sends a request and decodes a 2xx answer into out (when non-nil). in,
// when non-nil, is sent as JSON; a json.RawMessage or []byte is sent as is.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	resp, err := c.send(ctx, method, path, q, in, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return c.readError(ctx, method, path, err)
	}
	return nil
}

// send sends a request and returns a 2xx answer, whose body the caller
// closes; any other answer is an *APIError. in is sent as do says.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, in any, accept string) (*http.Response, error) {
	u := c.BaseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if in != nil {
		var b []byte
		switch v := in.(type) {
		case json.RawMessage:
			b = v
		case []byte:
			b = v
		default:
			var err error
			if b, err = json.Marshal(in); err != nil {
				return nil, fmt.Errorf("encoding request: %w", err)
			}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ConnError{URL: c.BaseURL, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// readError is the error of an answer whose body broke off or did not
// decode: the context's error when it ended, else a *ConnError.
func (c *Client) readError(ctx context.Context, method, path string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &ConnError{URL: c.BaseURL, Err: fmt.Errorf("reading the answer to %s %s: %w", method, path, err)}
}

// decodeError turns a non-2xx answer into an *APIError. An answer without
// herald's error body (a proxy's page) gets code "http_<status>" and the
// start of its body as message.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error != nil && body.Error.Code != "" {
		return &APIError{Status: resp.StatusCode, Code: body.Error.Code, Message: body.Error.Message, Field: body.Error.Field}
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{Status: resp.StatusCode, Code: fmt.Sprintf("http_%d", resp.StatusCode), Message: msg}
}

func pathID(prefix, id string) string {
	return prefix + url.PathEscape(id)
}

func setTime(q url.Values, name string, t time.Time) {
	if !t.IsZero() {
		q.Set(name, t.UTC().Format(time.RFC3339Nano))
	}
}

func setNonEmpty(q url.Values, name, v string) {
	if v != "" {
		q.Set(name, v)
	}
}

// setPage sets limit (when > 0: else the server's default) and cursor
// (when not "").
func setPage(q url.Values, limit int, cursor string) {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	setNonEmpty(q, "cursor", cursor)
}

// ---- subscriptions ----

// CreateSubscription creates a subscription from a request body with the
// API's field names (url, event_types, filter, headers, …). The answer
// holds the signing secret, shown only here.
func (c *Client) CreateSubscription(ctx context.Context, body map[string]any) (*Subscription, error) {
	var out Subscription
	return &out, c.do(ctx, http.MethodPost, "/v1/subscriptions", nil, body, &out)
}

// ListSubscriptions returns one page (limit 0: the server's default, 100).
func (c *Client) ListSubscriptions(ctx context.Context, limit int, cursor string) (*SubscriptionList, error) {
	return c.ListTenantSubscriptions(ctx, "", limit, cursor)
}

// ListTenantSubscriptions is ListSubscriptions of one tenant ("": all).
func (c *Client) ListTenantSubscriptions(ctx context.Context, tenant string, limit int, cursor string) (*SubscriptionList, error) {
	q := url.Values{}
	setNonEmpty(q, "tenant", tenant)
	setPage(q, limit, cursor)
	var out SubscriptionList
	return &out, c.do(ctx, http.MethodGet, "/v1/subscriptions", q, nil, &out)
}

// GetSubscription returns one subscription (without its secret).
func (c *Client) GetSubscription(ctx context.Context, id string) (*Subscription, error) {
	var out Subscription
	return &out, c.do(ctx, http.MethodGet, pathID("/v1/subscriptions/", id), nil, nil, &out)
}

// UpdateSubscription sends patch as a JSON merge patch (RFC 7396; a nil
// value removes a field, "filter" is replaced whole).
func (c *Client) UpdateSubscription(ctx context.Context, id string, patch map[string]any) (*Subscription, error) {
	var out Subscription
	return &out, c.do(ctx, http.MethodPatch, pathID("/v1/subscriptions/", id), nil, patch, &out)
}

// DeleteSubscription deletes a subscription; its pending deliveries are
// cancelled.
func (c *Client) DeleteSubscription(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, pathID("/v1/subscriptions/", id), nil, nil, nil)
}

// GetSecret returns the subscription's signing secrets, newest first.
func (c *Client) GetSecret(ctx context.Context, id string) (*Secrets, error) {
	var out Secrets
	return &out, c.do(ctx, http.MethodGet, pathID("/v1/subscriptions/", id)+"/secret", nil, nil, &out)
}

// RotateSecretParams are the optional fields of a rotation.
type RotateSecretParams struct {
	// Secret is the new secret (whsec_…); empty: the server makes one.
	Secret string `json:"secret,omitempty"`
	// GracePeriodS is how long older secrets keep signing; nil: the
	// server's default.
	GracePeriodS *int64 `json:"grace_period_s,omitempty"`
}

// RotateSecret makes a new signing secret; the answer shows it once.
func (c *Client) RotateSecret(ctx context.Context, id string, p RotateSecretParams) (*Secrets, error) {
	var out Secrets
	return &out, c.do(ctx, http.MethodPost, pathID("/v1/subscriptions/", id)+"/secret/rotate", nil, p, &out)
}

// TestSubscription queues a herald.test event to this subscription only;
// data nil sends the server's default payload.
func (c *Client) TestSubscription(ctx context.Context, id string, data json.RawMessage) (*TestResult, error) {
	var body any = struct{}{}
	if data != nil {
		body = map[string]json.RawMessage{"data": data}
	}
	var out TestResult
	return &out, c.do(ctx, http.MethodPost, pathID("/v1/subscriptions/", id)+"/test", nil, body, &out)
}

// TestFilter evaluates a filter and event types against an event as
// fan-out would.
func (c *Client) TestFilter(ctx context.Context, p FilterTestParams) (*FilterTestResult, error) {
	var out FilterTestResult
	return &out, c.do(ctx, http.MethodPost, "/v1/filters/test", nil, p, &out)
}

// ---- connections (admin) ----

// CreateConnection creates an operator-owned broker connection.
func (c *Client) CreateConnection(ctx context.Context, in ConnectionInput) (*Connection, error) {
	var out Connection
	return &out, c.do(ctx, http.MethodPost, "/v1/connections", nil, in, &out)
}

// ListConnections returns one page of connections (limit 0: the server's
// default, 100).
func (c *Client) ListConnections(ctx context.Context, limit int, cursor string) (*ConnectionList, error) {
	q := url.Values{}
	setPage(q, limit, cursor)
	var out ConnectionList
	return &out, c.do(ctx, http.MethodGet, "/v1/connections", q, nil, &out)
}

// GetConnection returns one connection (its URL without the password).
func (c *Client) GetConnection(ctx context.Context, name string) (*Connection, error) {
	var out Connection
	return &out, c.do(ctx, http.MethodGet, pathID("/v1/connections/", name), nil, nil, &out)
}

// UpdateConnection replaces the fields patch names: url (a password of
// "***" keeps the stored one), tls, tenants ("all" or a list).
func (c *Client) UpdateConnection(ctx context.Context, name string, patch map[string]any) (*Connection, error) {
	var out Connection
	return &out, c.do(ctx, http.MethodPatch, pathID("/v1/connections/", name), nil, patch, &out)
}

// DeleteConnection deletes a connection; the server answers 409 (a
// conflict *Error) while a subscription or a source uses it.
func (c *Client) DeleteConnection(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, pathID("/v1/connections/", name), nil, nil, nil)
}

// ---- sources (admin) ----

// CreateSource creates a broker source herald consumes events from.
func (c *Client) CreateSource(ctx context.Context, in SourceInput) (*Source, error) {
	var out Source
	return &out, c.do(ctx, http.MethodPost, "/v1/sources", nil, in, &out)
}

// ListSources returns one page of sources, without status (limit 0: the
// server's default, 100).
func (c *Client) ListSources(ctx context.Context, limit int, cursor string) (*SourceList, error) {
	q := url.Values{}
	setPage(q, limit, cursor)
	var out SourceList
	return &out, c.do(ctx, http.MethodGet, "/v1/sources", q, nil, &out)
}

// GetSource returns one source with its Status.
func (c *Client) GetSource(ctx context.Context, name string) (*Source, error) {
	var out Source
	return &out, c.do(ctx, http.MethodGet, pathID("/v1/sources/", name), nil, nil, &out)
}

// UpdateSource replaces the fields patch names (mapping as a whole; a nil
// value clears a field); name and type cannot change.
func (c *Client) UpdateSource(ctx context.Context, name string, patch map[string]any) (*Source, error) {
	var out Source
	return &out, c.do(ctx, http.MethodPatch, pathID("/v1/sources/", name), nil, patch, &out)
}

// DeleteSource deletes a source; herald stops consuming it.
func (c *Client) DeleteSource(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, pathID("/v1/sources/", name), nil, nil, nil)
}

// ---- event types ----

// CreateEventType adds an event type to the catalog (admin).
func (c *Client) CreateEventType(ctx context.Context, in EventTypeInput) (*EventType, error) {
	var out EventType
	return &out, c.do(ctx, http.MethodPost, "/v1/event-types", nil, in, &out)
}

// ListEventTypes returns one page of the catalog (limit 0: the server's
// default, 100); deprecated types only with includeDeprecated. Any token
// may read the catalog.
func (c *Client) ListEventTypes(ctx context.Context, limit int, cursor string, includeDeprecated bool) (*EventTypeList, error) {
	q := url.Values{}
	setPage(q, limit, cursor)
	if includeDeprecated {
		q.Set("include_deprecated", "true")
	}
	var out EventTypeList
	return &out, c.do(ctx, http.MethodGet, "/v1/event-types", q, nil, &out)
}

// GetEventType returns one event type.
func (c *Client) GetEventType(ctx context.Context, name string) (*EventType, error) {
	var out EventType
	return &out, c.do(ctx, http.MethodGet, pathID("/v1/event-types/", name), nil, nil, &out)
}

// UpdateEventType replaces the fields patch names (description, schema,
// example, deprecated, validate; a nil schema or example removes it).
func (c *Client) UpdateEventType(ctx context.Context, name string, patch map[string]any) (*EventType, error) {
	var out EventType
	return &out, c.do(ctx, http.MethodPatch, pathID("/v1/event-types/", name), nil, patch, &out)
}

// DeleteEventType removes an event type from the catalog (admin).
func (c *Client) DeleteEventType(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, pathID("/v1/event-types/", name), nil, nil, nil)
}

// ---- tokens ----

// CreateToken makes a scoped API token (admin). The answer's Token is
// shown only here.
func (c *Client) CreateToken(ctx context.Context, in TokenInput) (*Token, error) {
	body := map[string]any{"name": in.Name, "scopes": in.Scopes}
	if in.Tenant != "" {
		body["tenant"] = in.Tenant
	}
	if !in.ExpiresAt.IsZero() {
		body["expires_at"] = in.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	var out Token
	return &out, c.do(ctx, http.MethodPost, "/v1/tokens", nil, body, &out)
}

// Whoami describes the client's own token: its scopes and tenant. Any
// valid token may call it.
func (c *Client) Whoami(ctx context.Context) (*Whoami, error) {
	var out Whoami
	return &out, c.do(ctx, http.MethodGet, "/v1/whoami", nil, nil, &out)
}

// ListTokens lists the stored tokens (never the tokens themselves).
func (c *Client) ListTokens(ctx context.Context) (*TokenList, error) {
	var out TokenList
	return &out, c.do(ctx, http.MethodGet, "/v1/tokens", nil, nil, &out)
}

// RevokeToken revokes a token: it stops working at the next request.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, pathID("/v1/tokens/", id), nil, nil, nil)
}

// ---- events ----

// Publish stores one event and fans it out.
func (c *Client) Publish(ctx context.Context, ev EventInput) (*PublishResult, error) {
	var out PublishResult
	return &out, c.do(ctx, http.MethodPost, "/v1/events", nil, ev, &out)
}

// PublishBatch publishes up to 1000 events, each given as its JSON object.
// Items are accepted or rejected one by one; Results is in input order.
func (c *Client) PublishBatch(ctx context.Context, events []json.RawMessage) (*BatchResult, error) {
	var out BatchResult
	return &out, c.do(ctx, http.MethodPost, "/v1/events/batch", nil, map[string][]json.RawMessage{"events": events}, &out)
}

// GetEvent returns an event and the deliveries it fanned out to.
func (c *Client) GetEvent(ctx context.Context, id string) (*Event, error) {
	var out Event
	return &out, c.do(ctx, http.MethodGet, pathID("/v1/events/", id), nil, nil, &out)
}

// ListEvents returns one page of events, newest first.
func (c *Client) ListEvents(ctx context.Context, p EventListParams) (*EventList, error) {
	q := url.Values{}
	setNonEmpty(q, "type", p.Type)
	setNonEmpty(q, "key", p.Key)
	setNonEmpty(q, "tenant", p.Tenant)
	setTime(q, "since", p.Since)
	setTime(q, "until", p.Until)
	if p.ExcludeSystem {
		q.Set("exclude_system", "true")
	}
	setPage(q, p.Limit, p.Cursor)
	var out EventList
	return &out, c.do(ctx, http.MethodGet, "/v1/events", q, nil, &out)
}

// ---- deliveries ----

// ListDeliveries returns one page of deliveries, newest first.
func (c *Client) ListDeliveries(ctx context.Context, p DeliveryListParams) (*DeliveryList, error) {
	q := url.Values{}
	setNonEmpty(q, "subscription_id", p.SubscriptionID)
	setNonEmpty(q, "event_id", p.EventID)
	setNonEmpty(q, "tenant", p.Tenant)
	setNonEmpty(q, "state", p.State)
	setTime(q, "since", p.Since)
	setTime(q, "until", p.Until)
	setPage(q, p.Limit, p.Cursor)
	var out DeliveryList
	return &out, c.do(ctx, http.MethodGet, "/v1/deliveries", q, nil, &out)
}

// GetDelivery returns a delivery with its attempts and, when pending, what
// it waits for.
func (c *Client) GetDelivery(ctx context.Context, id string) (*Delivery, error) {
	var out Delivery
	return &out, c.do(ctx, http.MethodGet, pathID("/v1/deliveries/", id), nil, nil, &out)
}

// RetryDelivery puts a finished delivery back in the queue (409 conflict
// while it is pending or in flight).
func (c *Client) RetryDelivery(ctx context.Context, id string) (*Delivery, error) {
	var out Delivery
	return &out, c.do(ctx, http.MethodPost, pathID("/v1/deliveries/", id)+"/retry", nil, struct{}{}, &out)
}

// ---- dead letters ----

// DeadLetterGroups counts dead letters by subscription and error class
// (subscriptionID "" for all).
func (c *Client) DeadLetterGroups(ctx context.Context, subscriptionID string) ([]DeadLetterGroup, error) {
	q := url.Values{}
	setNonEmpty(q, "subscription_id", subscriptionID)
	var out struct {
		Groups []DeadLetterGroup `json:"groups"`
	}
	return out.Groups, c.do(ctx, http.MethodGet, "/v1/dead-letters", q, nil, &out)
}

// Redrive puts a subscription's dead letters back in the queue (or, with
// DryRun, only counts them). With Limit, repeat until Remaining is 0.
func (c *Client) Redrive(ctx context.Context, p RedriveParams) (*RedriveResult, error) {
	body := map[string]any{"subscription_id": p.SubscriptionID}
	if !p.Since.IsZero() {
		body["since"] = p.Since.UTC().Format(time.RFC3339Nano)
	}
	if !p.Until.IsZero() {
		body["until"] = p.Until.UTC().Format(time.RFC3339Nano)
	}
	if p.Error != "" {
		body["error"] = p.Error
	}
	if p.Limit > 0 {
		body["limit"] = p.Limit
	}
	if p.DryRun {
		body["dry_run"] = true
	}
	var out RedriveResult
	return &out, c.do(ctx, http.MethodPost, "/v1/dead-letters/redrive", nil, body, &out)
}

// ---- resend and replay ----

// ResendEvent makes a new delivery of event id to one subscription (even
// one that received it before). tenant names the event's tenant when ids
// repeat across tenants ("" for none: the API looks in every tenant).
func (c *Client) ResendEvent(ctx context.Context, id, subscriptionID, tenant string) (*ResendResult, error) {
	q := url.Values{}
	setNonEmpty(q, "tenant", tenant)
	var out ResendResult
	return &out, c.do(ctx, http.MethodPost, pathID("/v1/events/", id)+"/resend", q,
		map[string]any{"subscription_id": subscriptionID}, &out)
}

// Replay makes a new delivery to a subscription for every stored event in
// [Since, Until) it receives (or, with DryRun, only counts them). Each
// call sends again: count first. When Truncated, call again with Cursor
// set to NextCursor.
func (c *Client) Replay(ctx context.Context, p ReplayParams) (*ReplayResult, error) {
	body := map[string]any{
		"since": p.Since.UTC().Format(time.RFC3339Nano),
		"until": p.Until.UTC().Format(time.RFC3339Nano),
	}
	if len(p.EventTypes) > 0 {
		body["event_types"] = p.EventTypes
	}
	if p.DryRun {
		body["dry_run"] = true
	}
	if p.Cursor != "" {
		body["cursor"] = p.Cursor
	}
	var out ReplayResult
	return &out, c.do(ctx, http.MethodPost, pathID("/v1/subscriptions/", p.SubscriptionID)+"/replay", nil, body, &out)
}

// ---- stats ----

// Stats returns the queue per tier and the totals.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var out Stats
	return &out, c.do(ctx, http.MethodGet, "/v1/stats", nil, nil, &out)
}

// SubscriptionStats returns per-subscription outcomes since since (zero:
// the server's default, 24 h).
func (c *Client) SubscriptionStats(ctx context.Context, since time.Time) (*SubscriptionStatsList, error) {
	q := url.Values{}
	setTime(q, "since", since)
	var out SubscriptionStatsList
	return &out, c.do(ctx, http.MethodGet, "/v1/stats/subscriptions", q, nil, &out)
}

// TenantStats returns per-tenant outcomes since since (zero: 24 h) for the
// limit tenants with the most queued work (0: the server's default, 20),
// the rest summed (admin).
func (c *Client) TenantStats(ctx context.Context, since time.Time, limit int) (*TenantStatsList, error) {
	q := url.Values{}
	setTime(q, "since", since)
	setPage(q, limit, "")
	var out TenantStatsList
	return &out, c.do(ctx, http.MethodGet, "/v1/stats/tenants", q, nil, &out)
}

// Metrics reads GET /metrics (Prometheus text format) and returns each
// sample's value by its series as written: the name, with its labels when it
// has some ({le="0.5"} and the like). Comment lines are left out. Token is
// sent as the bearer, which a node with --metrics-token checks.
func (c *Client) Metrics(ctx context.Context) (map[string]float64, error) {
	resp, err := c.send(ctx, http.MethodGet, "/metrics", nil, nil, "text/plain")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// A label value may hold spaces: the series ends at the closing
		// brace when there is one.
		end := strings.IndexByte(line, ' ')
		if i := strings.IndexByte(line, '{'); i >= 0 && (end < 0 || i < end) {
			end = strings.LastIndexByte(line, '}') + 1
		}
		if end <= 0 || end >= len(line) {
			continue
		}
		fields := strings.Fields(line[end:]) // value, then an optional timestamp
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[line[:end]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, c.readError(ctx, http.MethodGet, "/metrics", err)
	}
	return out, nil
}

// IsConnError reports whether err means no answer came back.
func IsConnError(err error) bool {
	var ce *ConnError
	return errors.As(err, &ce)
}

// CreatePortalLink makes a one-time link that opens the consumer portal
// confined to tenant (admin).
func (c *Client) CreatePortalLink(ctx context.Context, tenant string, in PortalLinkInput) (*PortalLink, error) {
	body := map[string]any{}
	if in.TTL > 0 {
		body["ttl_s"] = int64(in.TTL / time.Second)
	}
	if in.Theme != nil {
		body["theme"] = in.Theme
	}
	var out PortalLink
	return &out, c.do(ctx, http.MethodPost, "/v1/tenants/"+url.PathEscape(tenant)+"/portal", nil, body, &out)
}
