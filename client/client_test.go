package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func setup(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return New(srv.URL+"/", "tok")
}

func TestAPIError(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		require.Equal(t, "/v1/subscriptions/a%2Fb", r.URL.RawPath)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"subscription \"a/b\" not found","field":"id"}}`)
	})
	_, err := c.GetSubscription(context.Background(), "a/b")
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, &APIError{Status: 404, Code: "not_found", Message: `subscription "a/b" not found`, Field: "id"}, ae)
	require.ErrorIs(t, err, ErrNotFound)
	require.NotErrorIs(t, err, ErrConflict)
	require.Equal(t, `not_found: subscription "a/b" not found`, err.Error())
}

func TestNonJSONError(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html>bad gateway</html>")
	})
	_, err := c.Stats(context.Background())
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "http_502", ae.Code)
	require.Equal(t, "<html>bad gateway</html>", ae.Message)
}

func TestConnError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c := New("http://"+addr, "")
	_, err = c.Stats(context.Background())
	var ce *ConnError
	require.ErrorAs(t, err, &ce)
	require.True(t, IsConnError(err))
	require.Contains(t, err.Error(), "cannot connect to http://"+addr)
	var opErr *net.OpError
	require.ErrorAs(t, err, &opErr, "Unwrap reaches the transport's error")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Stats(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, IsConnError(err))
	require.False(t, errors.As(err, &ce))
}

func TestPublishAndRedriveBodies(t *testing.T) {
	t.Parallel()
	var bodies []string
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, r.Method+" "+r.URL.Path+" "+string(b))
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":"e1","duplicate":false,"deliveries":2,"redriven":1,"matched":3,"remaining":2}`)
	})
	ctx := context.Background()
	pub, err := c.Publish(ctx, EventInput{Type: "order.created", Data: []byte(`{"a":1}`)})
	require.NoError(t, err)
	require.Equal(t, &PublishResult{ID: "e1", Deliveries: 2}, pub)
	red, err := c.Redrive(ctx, RedriveParams{SubscriptionID: "s", Limit: 1, Error: "timeout"})
	require.NoError(t, err)
	require.Equal(t, &RedriveResult{Redriven: 1, Matched: 3, Remaining: 2}, red)
	require.Equal(t, []string{
		`POST /v1/events {"type":"order.created","data":{"a":1}}`,
		`POST /v1/dead-letters/redrive {"error":"timeout","limit":1,"subscription_id":"s"}`,
	}, bodies)
}

func TestTokensAndTenantParams(t *testing.T) {
	t.Parallel()
	var got []string
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"tok_1","token":"hrld_x","name":"n","scopes":["events:publish"],"tenant":"acme","expires_at":null,"created_at":"2026-01-01T00:00:00Z"}`)
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			_, _ = io.WriteString(w, `{"data":[],"next_cursor":null}`)
		}
	})
	ctx := context.Background()
	tok, err := c.CreateToken(ctx, TokenInput{Name: "n", Scopes: []string{"events:publish"}, Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, "hrld_x", tok.Token)
	_, err = c.ListTokens(ctx)
	require.NoError(t, err)
	require.NoError(t, c.RevokeToken(ctx, "tok_1"))
	_, err = c.ListTenantSubscriptions(ctx, "acme", 0, "")
	require.NoError(t, err)
	_, err = c.ListEvents(ctx, EventListParams{Tenant: "acme"})
	require.NoError(t, err)
	_, err = c.ListEvents(ctx, EventListParams{ExcludeSystem: true})
	require.NoError(t, err)
	_, err = c.ListDeliveries(ctx, DeliveryListParams{Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, []string{
		`POST /v1/tokens {"name":"n","scopes":["events:publish"],"tenant":"acme"}`,
		"GET /v1/tokens ",
		"DELETE /v1/tokens/tok_1 ",
		"GET /v1/subscriptions?tenant=acme ",
		"GET /v1/events?tenant=acme ",
		"GET /v1/events?exclude_system=true ",
		"GET /v1/deliveries?tenant=acme ",
	}, got)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "GET /metrics", r.Method+" "+r.URL.Path)
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, `# HELP herald_direct_dispatch_total Deliveries started without a claim.
# TYPE herald_direct_dispatch_total counter
herald_direct_dispatch_total 42
process_cpu_seconds_total 1.25
herald_claim_batch_size_bucket{le="+Inf"} 7
herald_up{node="a b"} 1 1700000000000

not_a_number x
`)
	})
	m, err := c.Metrics(context.Background())
	require.NoError(t, err)
	require.Equal(t, map[string]float64{
		"herald_direct_dispatch_total":              42,
		"process_cpu_seconds_total":                 1.25,
		`herald_claim_batch_size_bucket{le="+Inf"}`: 7,
		`herald_up{node="a b"}`:                     1,
	}, m)

	c = setup(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"invalid metrics token"}}`)
	})
	_, err = c.Metrics(context.Background())
	require.ErrorIs(t, err, ErrUnauthorized)
}

func TestConnections(t *testing.T) {
	t.Parallel()
	var got []string
	conn := `{"name":"rabbit","type":"amqp","url":"amqp://guest:***@h:5672/","tls":null,"tenants":"all","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, conn)
		case http.MethodDelete:
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"conflict","message":"connection \"rabbit\" is used by subscription sub_1"}}`)
		default:
			if strings.HasSuffix(r.URL.Path, "/connections") {
				_, _ = io.WriteString(w, `{"data":[`+strings.Replace(conn, `"all"`, `["acme"]`, 1)+`],"next_cursor":null}`)
				return
			}
			_, _ = io.WriteString(w, conn)
		}
	})
	ctx := context.Background()
	created, err := c.CreateConnection(ctx, ConnectionInput{Name: "rabbit", Type: "amqp", URL: "amqp://guest:guest@h:5672/",
		Tenants: ConnectionTenants{All: true}})
	require.NoError(t, err)
	require.True(t, created.Tenants.All)
	list, err := c.ListConnections(ctx, 10, "")
	require.NoError(t, err)
	require.Equal(t, ConnectionTenants{List: []string{"acme"}}, list.Data[0].Tenants)
	_, err = c.GetConnection(ctx, "rabbit")
	require.NoError(t, err)
	_, err = c.UpdateConnection(ctx, "rabbit", map[string]any{"tenants": []string{"acme"}})
	require.NoError(t, err)
	err = c.DeleteConnection(ctx, "rabbit")
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "conflict", apiErr.Code)
	require.Equal(t, []string{
		`POST /v1/connections {"name":"rabbit","type":"amqp","url":"amqp://guest:guest@h:5672/","tenants":"all"}`,
		"GET /v1/connections?limit=10 ",
		"GET /v1/connections/rabbit ",
		`PATCH /v1/connections/rabbit {"tenants":["acme"]}`,
		"DELETE /v1/connections/rabbit ",
	}, got)

	d := AMQPDestination("rabbit", "events", "")
	b, err := json.Marshal(d)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"amqp","connection":"rabbit","exchange":"events","routing_key":""}`, string(b))
}

func TestSources(t *testing.T) {
	t.Parallel()
	var got []string
	src := `{"name":"publishing","type":"amqp","connection":"rabbit","queue":"content","mapping":{"key":"body.content_id"},` +
		`"tenant":"acme","ordered":true,"enabled":true,"prefetch":0,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"`
	status := `,"status":{"state":"consuming","consumed":10,"duplicates":1,"rejected":1,"pending":3,"nodes":[],` +
		`"recent_rejects":[{"at":"2026-01-01T00:00:01Z","node":"n1","reason":"not_json","message":"the body is not JSON"}]}`
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, src+"}")
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(r.URL.Path, "/sources"):
			_, _ = io.WriteString(w, `{"data":[`+src+`}],"next_cursor":"abc"}`)
		case r.Method == http.MethodGet:
			_, _ = io.WriteString(w, src+status+"}")
		default:
			_, _ = io.WriteString(w, src+"}")
		}
	})
	ctx := context.Background()
	created, err := c.CreateSource(ctx, SourceInput{Name: "publishing", Type: "amqp", Connection: "rabbit", Queue: "content",
		Mapping: &SourceMapping{Key: "body.content_id"}, Tenant: "acme", Ordered: true})
	require.NoError(t, err)
	require.Equal(t, &SourceMapping{Key: "body.content_id"}, created.Mapping)
	require.Nil(t, created.Status)
	list, err := c.ListSources(ctx, 10, "")
	require.NoError(t, err)
	require.Equal(t, "publishing", list.Data[0].Name)
	require.Equal(t, "abc", *list.NextCursor)
	one, err := c.GetSource(ctx, "publishing")
	require.NoError(t, err)
	require.Equal(t, "consuming", one.Status.State)
	require.Equal(t, int64(3), *one.Status.Pending)
	require.Equal(t, "not_json", one.Status.RecentRejects[0].Reason)
	_, err = c.UpdateSource(ctx, "publishing", map[string]any{"mapping": nil, "enabled": false})
	require.NoError(t, err)
	require.NoError(t, c.DeleteSource(ctx, "publishing"))
	require.Equal(t, []string{
		`POST /v1/sources {"name":"publishing","type":"amqp","connection":"rabbit","queue":"content","mapping":{"key":"body.content_id"},"tenant":"acme","ordered":true}`,
		"GET /v1/sources?limit=10 ",
		"GET /v1/sources/publishing ",
		`PATCH /v1/sources/publishing {"enabled":false,"mapping":null}`,
		"DELETE /v1/sources/publishing ",
	}, got)
}

func TestResendAndReplayBodies(t *testing.T) {
	t.Parallel()
	var got []string
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"delivery_id":"dlv_1","event_id":"e/1","subscription_id":"s","matched":3,"replayed":3,"dry_run":false,"truncated":true,"next_cursor":"c1"}`)
	})
	ctx := context.Background()
	res, err := c.ResendEvent(ctx, "e/1", "s", "acme")
	require.NoError(t, err)
	require.Equal(t, &ResendResult{DeliveryID: "dlv_1", EventID: "e/1", SubscriptionID: "s"}, res)
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rep, err := c.Replay(ctx, ReplayParams{SubscriptionID: "s", Since: since, Until: since.Add(time.Hour),
		EventTypes: []string{"order.*"}, DryRun: true, Cursor: "c0"})
	require.NoError(t, err)
	cursor := "c1"
	require.Equal(t, &ReplayResult{Matched: 3, Replayed: 3, Truncated: true, NextCursor: &cursor}, rep)
	require.Equal(t, []string{
		`POST /v1/events/e%2F1/resend?tenant=acme {"subscription_id":"s"}`,
		`POST /v1/subscriptions/s/replay {"cursor":"c0","dry_run":true,"event_types":["order.*"],"since":"2026-01-02T03:04:05Z","until":"2026-01-02T04:04:05Z"}`,
	}, got)
}

func TestWhoami(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/whoami" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"token_id":"tok_1","scopes":["subscriptions:read"],"tenant":"acme","admin":false}`)
	})
	me, err := c.Whoami(context.Background())
	require.NoError(t, err)
	require.Equal(t, &Whoami{TokenID: "tok_1", Scopes: []string{"subscriptions:read"}, Tenant: "acme"}, me)
}

func TestEventTypes(t *testing.T) {
	t.Parallel()
	var got []string
	et := `{"name":"order.placed","description":"Placed.","schema":{"type":"object"},"example":{"amount":1},` +
		`"deprecated":false,"validate":true,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, et)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(r.URL.Path, "/event-types"):
			_, _ = io.WriteString(w, `{"data":[`+et+`],"next_cursor":null}`)
		default:
			_, _ = io.WriteString(w, et)
		}
	})
	ctx := context.Background()
	created, err := c.CreateEventType(ctx, EventTypeInput{Name: "order.placed", Description: "Placed.",
		Schema: json.RawMessage(`{"type":"object"}`), Example: json.RawMessage(`{"amount":1}`), Validate: true})
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"object"}`, string(created.Schema))
	require.True(t, created.Validate)
	list, err := c.ListEventTypes(ctx, 10, "", true)
	require.NoError(t, err)
	require.Equal(t, "order.placed", list.Data[0].Name)
	require.Nil(t, list.NextCursor)
	_, err = c.GetEventType(ctx, "order.placed")
	require.NoError(t, err)
	_, err = c.UpdateEventType(ctx, "order.placed", map[string]any{"example": nil, "deprecated": true})
	require.NoError(t, err)
	require.NoError(t, c.DeleteEventType(ctx, "order.placed"))
	require.Equal(t, []string{
		`POST /v1/event-types {"name":"order.placed","description":"Placed.","schema":{"type":"object"},"example":{"amount":1},"validate":true}`,
		"GET /v1/event-types?include_deprecated=true&limit=10 ",
		"GET /v1/event-types/order.placed ",
		`PATCH /v1/event-types/order.placed {"deprecated":true,"example":null}`,
		"DELETE /v1/event-types/order.placed ",
	}, got)
}
