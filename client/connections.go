package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// ---- connections (admin) ----

// Connection is an operator-owned broker connection. URL comes back with
// its password masked; Tenants is the list of tenants allowed, or "all".
type Connection struct {
	Name      string          `json:"name"`
	Type      string          `json:"type"`
	URL       string          `json:"url"`
	Tenants   json.RawMessage `json:"tenants"`
	CreatedAt string          `json:"created_at"`
	UpdatedAt string          `json:"updated_at"`
}

// CreateConnection creates a broker connection from a request body with the
// API's field names (name, type, url, tls, tenants).
func (c *Client) CreateConnection(ctx context.Context, body map[string]any) (*Connection, error) {
	var out Connection
	return &out, c.do(ctx, http.MethodPost, "/v1/connections", nil, body, &out)
}

// DeleteConnection deletes the named connection; the server refuses (409)
// while a subscription uses it.
func (c *Client) DeleteConnection(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/connections/"+url.PathEscape(name), nil, nil, nil)
}
