package herald

import (
	"encoding/json"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// EventType is one entry of the event type catalog (issue 24 item 16):
// what an event type means, the JSON Schema its data follows and an
// example of it. Subscription forms, the portal and the filter tester
// offer the catalog's types; when Validate is set and Schema is not
// empty, POST /v1/events, the batch endpoint and sources refuse an event
// of this type whose data does not conform (CodeSchemaMismatch). Events
// of types missing from the catalog are accepted as before: the catalog
// documents, it does not gate.
type EventType struct {
	// Name is the exact event type (no pattern): CheckEventType.
	Name        string `json:"name"`
	Description string `json:"description"`
	// Schema is a JSON Schema (draft 2020-12 unless it names another
	// with $schema) for the event's data; nil when none.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Example is an example of the event's data; it conforms to Schema
	// when both are set. nil when none.
	Example json.RawMessage `json:"example,omitempty"`
	// Deprecated marks a type producers should stop publishing: forms
	// no longer offer it, publishing it is still accepted.
	Deprecated bool `json:"deprecated"`
	// Validate turns schema validation of published events on.
	Validate  bool      `json:"validate"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Event type catalog limits. They bound what a node holds per type and
// what a schema compile may chew on (a schema is hostile input until it
// compiled).
const (
	// MaxEventTypeLen bounds an event type (Event.Type and
	// EventType.Name), in characters.
	MaxEventTypeLen = 256
	// MaxEventTypeDescription bounds EventType.Description (1 KiB).
	MaxEventTypeDescription = 1 << 10
	// MaxEventTypeSchema bounds EventType.Schema (64 KiB of JSON).
	MaxEventTypeSchema = 64 << 10
	// MaxEventTypeExample bounds EventType.Example (64 KiB of JSON).
	MaxEventTypeExample = 64 << 10
)

// CheckEventTypeName checks that name is an exact event type a producer
// may publish: 1 to MaxEventTypeLen printable characters without
// whitespace, no pattern characters ('*', '?', '[', ']', '\\': a catalog
// entry is one type, not a family), and not herald.* (herald's own system
// events, which producers cannot publish).
func CheckEventTypeName(name string) error {
	n := utf8.RuneCountInString(name)
	if name == "" || n > MaxEventTypeLen || !utf8.ValidString(name) {
		return FieldErrorf(CodeInvalidField, "name", "name must be 1 to %d characters, got %d", MaxEventTypeLen, n)
	}
	if strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return FieldErrorf(CodeInvalidField, "name", "name must not contain whitespace or control characters")
	}
	if i := strings.IndexAny(name, `*?[]\`); i >= 0 {
		return FieldErrorf(CodeInvalidField, "name",
			"name must be one exact event type, not a pattern: %q is not allowed", name[i:i+1])
	}
	if strings.HasPrefix(name, "herald.") {
		return FieldErrorf(CodeInvalidField, "name", "name is reserved: herald.* event types are herald's own")
	}
	return nil
}

// CheckEventType checks the shape of an event type: its name, the sizes
// of description, schema and example, and that schema and example are
// JSON (schema an object or a boolean). Compiling the schema and checking
// the example against it is the caller's (package eventtype). Errors are
// *Error naming the field.
func CheckEventType(et *EventType) error {
	if err := CheckEventTypeName(et.Name); err != nil {
		return err
	}
	if len(et.Description) > MaxEventTypeDescription {
		return FieldErrorf(CodeInvalidField, "description", "description must be at most %d bytes, got %d",
			MaxEventTypeDescription, len(et.Description))
	}
	if strings.IndexFunc(et.Description, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) >= 0 {
		return FieldErrorf(CodeInvalidField, "description", "description must not contain control characters other than newline and tab")
	}
	if len(et.Schema) > MaxEventTypeSchema {
		return FieldErrorf(CodeInvalidField, "schema", "schema must be at most %d bytes of JSON, got %d",
			MaxEventTypeSchema, len(et.Schema))
	}
	if len(et.Schema) > 0 {
		if !json.Valid(et.Schema) {
			return FieldErrorf(CodeInvalidField, "schema", "schema is not valid JSON")
		}
		if c := firstByte(et.Schema); c != '{' && c != 't' && c != 'f' {
			return FieldErrorf(CodeInvalidField, "schema", "schema must be a JSON Schema: an object or a boolean")
		}
	}
	if len(et.Example) > MaxEventTypeExample {
		return FieldErrorf(CodeInvalidField, "example", "example must be at most %d bytes of JSON, got %d",
			MaxEventTypeExample, len(et.Example))
	}
	if len(et.Example) > 0 && !json.Valid(et.Example) {
		return FieldErrorf(CodeInvalidField, "example", "example is not valid JSON")
	}
	if et.Validate && len(et.Schema) == 0 {
		return FieldErrorf(CodeInvalidField, "validate", "validate needs a schema to validate against")
	}
	return nil
}

// firstByte is the first non-space byte of b (0 when none).
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}
