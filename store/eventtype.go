package store

import (
	"context"

	"github.com/heraldhq/herald"
)

// EventTypeStore is the part of Store that keeps the event type catalog
// (issue 24 item 16, migration 020). Entries are operator-owned and
// shared by every tenant. Schema and example are stored as the JSON text
// the caller gave (compacted by the API), never re-encoded, so what is
// read back is byte for byte what was checked.
type EventTypeStore interface {
	// EventTypeCreate stores a new event type (the caller fills every
	// field, timestamps included) and bumps the event types version.
	// herald.ErrConflict when the name exists.
	EventTypeCreate(ctx context.Context, params *EventTypeCreateParams) (*herald.EventType, error)
	// EventTypeGet returns one event type or ErrNotFound.
	EventTypeGet(ctx context.Context, name string) (*herald.EventType, error)
	// EventTypeList pages through event types in name (byte) order.
	EventTypeList(ctx context.Context, params *EventTypeListParams) (*EventTypeListResult, error)
	// EventTypeUpdate replaces every mutable field (description, schema,
	// example, deprecated, validate, updated_at) of the type named
	// params.EventType.Name (the caller merged a PATCH) and bumps the
	// version. ErrNotFound if absent.
	EventTypeUpdate(ctx context.Context, params *EventTypeUpdateParams) (*herald.EventType, error)
	// EventTypeDelete removes an event type and bumps the version.
	// ErrNotFound if absent.
	EventTypeDelete(ctx context.Context, name string) error
	// EventTypesVersion changes whenever an event type is created,
	// updated or deleted: a node's schema cache (eventtype.Catalog) polls
	// it instead of reading the catalog on every publish.
	EventTypesVersion(ctx context.Context) (int64, error)
}

// EventTypeCreateParams are the inputs of EventTypeCreate.
type EventTypeCreateParams struct {
	EventType *herald.EventType
}

// EventTypeListParams page through event types.
type EventTypeListParams struct {
	// After returns types with name > After ("" for the first page).
	After string
	// Limit caps the page (0: every type).
	Limit int
	// IncludeDeprecated also lists deprecated types (otherwise skipped).
	IncludeDeprecated bool
}

// EventTypeListResult is one page.
type EventTypeListResult struct {
	EventTypes []*herald.EventType
	// More is true when a further page exists; the cursor is the last name.
	More bool
}

// EventTypeUpdateParams carry the merged event type; EventType.Name
// selects it.
type EventTypeUpdateParams struct {
	EventType *herald.EventType
}

// EventTypeJSONColumns are the schema and example column values of et
// (nil: NULL, none).
func EventTypeJSONColumns(et *herald.EventType) (schema, example *string) {
	if len(et.Schema) > 0 {
		s := string(et.Schema)
		schema = &s
	}
	if len(et.Example) > 0 {
		e := string(et.Example)
		example = &e
	}
	return schema, example
}

// EventTypeJSONFill sets et.Schema and et.Example from their columns.
func EventTypeJSONFill(et *herald.EventType, schema, example *string) {
	et.Schema, et.Example = nil, nil
	if schema != nil {
		et.Schema = []byte(*schema)
	}
	if example != nil {
		et.Example = []byte(*example)
	}
}
