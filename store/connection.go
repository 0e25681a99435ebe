package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
)

// Destinations and operator-owned connections (issue 22, migration 015).
//
// A webhook subscription keeps its url and method columns as the truth and
// stores no destination (NULL); every other type stores its
// herald.Destination as JSON, and a broker destination also copies its
// connection name into an indexed column, so ConnectionDelete finds a
// subscription using the connection with one index read in its own
// transaction. Connection URLs carry the broker password: they are sealed
// at rest with the same ring as subscription secrets (ConnectionAAD binds
// each to its name) and opened inside the store.

// ConnectionStore is the part of Store that keeps connections.
type ConnectionStore interface {
	// ConnectionCreate stores a new connection (the caller fills every
	// field, timestamps included). ErrConflict if the name is taken.
	ConnectionCreate(ctx context.Context, params *ConnectionCreateParams) (*herald.Connection, error)
	// ConnectionGet returns one connection with its URL readable, or
	// ErrNotFound. A URL the configured keys cannot open reads as "" (the
	// connection then resolves to nothing: see destination.Resolve).
	ConnectionGet(ctx context.Context, name string) (*herald.Connection, error)
	// ConnectionList pages through connections in name order.
	ConnectionList(ctx context.Context, params *ConnectionListParams) (*ConnectionListResult, error)
	// ConnectionUpdate replaces the mutable fields of a connection (URL,
	// TLS, Tenants, AllTenants, UpdatedAt; the caller merges a PATCH).
	// Name, Type and CreatedAt stay. ErrNotFound if absent.
	ConnectionUpdate(ctx context.Context, params *ConnectionUpdateParams) (*herald.Connection, error)
	// ConnectionDelete removes a connection. ErrNotFound if absent; an
	// ErrConflict-compatible *ConnectionInUseError when a live (not
	// deleted) subscription names it, or else a source does. The checks
	// and the delete run in one transaction, and SubscriptionCreate/Update
	// and SourceCreate/Update check the connection exists in theirs, so no
	// subscription or source is ever left naming a deleted connection.
	ConnectionDelete(ctx context.Context, params *ConnectionDeleteParams) error
}

// ConnectionCreateParams are the inputs of ConnectionCreate.
type ConnectionCreateParams struct {
	Connection *herald.Connection
}

// ConnectionListParams page through connections.
type ConnectionListParams struct {
	// Limit is at most MaxPageLimit; 0 means DefaultPageLimit.
	Limit int
	// After returns connections with name > After.
	After string
}

// ConnectionListResult is one page.
type ConnectionListResult struct {
	Connections []*herald.Connection
	// More is true when a further page exists; the cursor is the last name.
	More bool
}

// ConnectionUpdateParams carry the merged connection; Name selects it.
type ConnectionUpdateParams struct {
	Connection *herald.Connection
}

// ConnectionDeleteParams are the inputs of ConnectionDelete.
type ConnectionDeleteParams struct {
	Name string
}

// ConnectionInUseError is ConnectionDelete's answer for a connection a
// live subscription or a source still names. errors.Is(err, herald.ErrConflict) holds.
type ConnectionInUseError struct {
	Name string
	// SubscriptionID is one subscription using it (the smallest id).
	SubscriptionID string
	// SourceName, when SubscriptionID is "", is a source using it (the
	// smallest name).
	SourceName string
}

func (e *ConnectionInUseError) Error() string {
	if e.SubscriptionID == "" && e.SourceName != "" {
		return SourceInUseMessage(e.Name, e.SourceName)
	}
	return fmt.Sprintf("connection %q is used by subscription %s; delete that subscription or change its destination first",
		e.Name, e.SubscriptionID)
}

// Unwrap makes the error a herald conflict (HTTP 409) with the same
// message.
func (e *ConnectionInUseError) Unwrap() error {
	return &herald.Error{Code: herald.CodeConflict, Message: e.Error()}
}

// ErrConnectionMissing is SubscriptionCreate's and SubscriptionUpdate's
// answer for a destination naming a connection that does not exist when
// the transaction runs (deleted since the caller checked).
func ErrConnectionMissing(name string) error {
	return herald.FieldErrorf(herald.CodeInvalidField, "destination.connection",
		"destination.connection %q does not exist", name)
}

// ConnectionAAD is the AES-GCM additional data of a connection's sealed
// URL: a value copied to another connection's row does not open.
func ConnectionAAD(name string) string { return "herald/connection-url/" + name }

// ConnectionURLOpen returns the plain URL of a stored (possibly sealed)
// value, or "" when keys cannot open it.
func ConnectionURLOpen(keys *seal.Ring, stored, name string) string {
	plain, err := keys.Open(stored, ConnectionAAD(name))
	if err != nil {
		return ""
	}
	return plain
}

// ConnectionResealValue returns a connection's stored URL sealed under
// keys' first key, and false when it already is. A value keys cannot open
// is an error.
func ConnectionResealValue(keys *seal.Ring, stored, name string) (string, bool, error) {
	if keys.Current(stored) {
		return "", false, nil
	}
	plain, err := keys.Open(stored, ConnectionAAD(name))
	if err != nil {
		return "", false, fmt.Errorf("url of connection %s: %w", name, err)
	}
	sealed, err := keys.Seal(plain, ConnectionAAD(name))
	if err != nil {
		return "", false, err
	}
	return sealed, true, nil
}

// DestinationColumns returns the destination and connection column values
// of sub: both nil for a webhook (its url and method columns hold it).
func DestinationColumns(sub *herald.Subscription) (dest, conn *string, err error) {
	d := sub.Dest()
	if d.Type == herald.DestinationWebhook {
		return nil, nil, nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, nil, fmt.Errorf("destination of %s: %w", sub.ID, err)
	}
	s := string(b)
	if d.Connection != "" {
		c := d.Connection
		conn = &c
	}
	return &s, conn, nil
}

// DestinationFill sets sub.Destination from the destination column (nil:
// a webhook to sub.URL with sub.Method).
func DestinationFill(sub *herald.Subscription, dest *string) error {
	if dest == nil {
		sub.Destination = herald.Destination{Type: herald.DestinationWebhook, URL: sub.URL, Method: sub.Method}
		return nil
	}
	sub.Destination = herald.Destination{}
	if err := json.Unmarshal([]byte(*dest), &sub.Destination); err != nil {
		return fmt.Errorf("subscription %s destination: %w", sub.ID, err)
	}
	return nil
}

// WebhookColumns returns the url and method columns of sub: its own for a
// webhook, "" for other types (their Destination is the truth).
func WebhookColumns(sub *herald.Subscription) (url, method string) {
	d := sub.Dest()
	if d.Type != herald.DestinationWebhook {
		return "", ""
	}
	url, method = sub.URL, sub.Method
	if url == "" {
		url = d.URL
	}
	if method == "" {
		method = d.Method
	}
	return url, method
}
