package source

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
)

// DefaultMaxBody caps a message body, as the API caps a single event's
// request body (1 MiB): a larger message is rejected as too_large.
const DefaultMaxBody = 1 << 20

// excerptBytes bounds the body excerpt kept with a reject.
const excerptBytes = 200

// DecodeFunc decodes and validates one event JSON object by the API's own
// rules (POST /v1/events): cmd/herald passes httpapi.DecodeEvent followed
// by the event type catalog's schema check, so a source accepts exactly
// what the API accepts. An error with CodeSchemaMismatch is rejected as
// herald.RejectSchema, any other as herald.RejectInvalid.
type DecodeFunc func(body []byte) (*herald.Event, error)

// Converter turns messages of one source into events.
type Converter struct {
	src     *herald.Source
	mapping *filter.Mapping
	decode  DecodeFunc
	maxBody int
	route   string
	// mapped: the mapping has an expression; readsBody: one of them may
	// read the body (else the body is only checked, never decoded).
	mapped, readsBody bool
}

// NewConverter compiles src's mapping. maxBody ≤ 0 means DefaultMaxBody.
func NewConverter(src *herald.Source, decode DecodeFunc, maxBody int) (*Converter, error) {
	m, err := filter.CompileMapping(src.Mapping)
	if err != nil {
		return nil, err
	}
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	mapped := false
	for _, f := range filter.MappingFields {
		mapped = mapped || m.Has(f)
	}
	return &Converter{src: src, mapping: m, decode: decode, maxBody: maxBody, route: RouteField(src.Type),
		mapped: mapped, readsBody: m.ReadsBody()}, nil
}

// Reject is why a message cannot become an event.
type Reject struct {
	Reason  string // herald.Reject*
	Message string
}

func (r *Reject) Error() string { return r.Reason + ": " + r.Message }

func reject(reason, format string, args ...any) *Reject {
	return &Reject{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Convert maps m to an event, or says why it cannot be one. The event
// has no CreatedAt (the ingester stamps it).
func (c *Converter) Convert(m *Message) (*herald.Event, *Reject) {
	if len(m.Body) > c.maxBody {
		return nil, reject(herald.RejectTooLarge, "body is %d bytes; the limit is %d", len(m.Body), c.maxBody)
	}
	if !utf8.Valid(m.Body) {
		return nil, reject(herald.RejectNotJSON, "body is not valid UTF-8")
	}
	// The body is decoded only for expressions that may read it; else a
	// validity scan is enough (json.Unmarshal then only words the
	// reject). One difference: a number beyond float64 (1e400) is valid
	// JSON that json.Unmarshal refuses, so such a body is rejected only
	// when the mapping reads the body; the API accepts it in data.
	var body any
	if c.readsBody {
		if err := json.Unmarshal(m.Body, &body); err != nil {
			return nil, reject(herald.RejectNotJSON, "body is not JSON: %s", herald.CleanLine(err.Error(), 160))
		}
	} else if !json.Valid(m.Body) {
		err := json.Unmarshal(m.Body, &body)
		if err == nil { // cannot be: Unmarshal validates as Valid does
			err = errors.New("invalid JSON")
		}
		return nil, reject(herald.RejectNotJSON, "body is not JSON: %s", herald.CleanLine(err.Error(), 160))
	}
	var vals map[string]any // nil: nothing mapped
	if c.mapped {
		ts := ""
		if !m.Timestamp.IsZero() {
			ts = herald.FormatTime(m.Timestamp)
		}
		doc := filter.MessageDoc(body, m.Headers, map[string]string{c.route: m.Route}, m.MessageID, ts)
		var err error
		if vals, err = c.mapping.Apply(doc); err != nil {
			return nil, reject(herald.RejectMapping, "%s", err.Error())
		}
	}
	var obj eventJSON

	// id: mapped, else the broker's id, else the body's hash: a redelivery
	// of the same message is then a duplicate whatever the broker.
	id, rj := mappedString(vals, "id")
	if rj != nil {
		return nil, rj
	}
	switch {
	case id != "":
	case m.MessageID != "":
		id = m.MessageID
	default:
		id = HashID(m.Body)
	}
	obj.ID = id

	typ, rj := mappedString(vals, "type")
	if rj != nil {
		return nil, rj
	}
	if typ == "" && !c.mapping.Has("type") {
		typ = m.Route
	}
	if typ == "" {
		return nil, reject(herald.RejectMapping, "the message yields no event type (mapping.type gave nothing, or the %s is empty)", c.route)
	}
	obj.Type = typ

	if key, rj := mappedString(vals, "key"); rj != nil {
		return nil, rj
	} else {
		obj.Key = key
	}
	if v, ok := vals["version"]; ok && v != nil {
		n, err := integer(v)
		if err != nil {
			return nil, reject(herald.RejectMapping, "mapping.version %s", err)
		}
		obj.Version = &n
	}
	tenant, rj := mappedString(vals, "tenant")
	if rj != nil {
		return nil, rj
	}
	if c.src.Tenant != "" {
		if tenant != "" && tenant != c.src.Tenant {
			return nil, reject(herald.RejectTenant, "the message maps to tenant %q; this source publishes for tenant %q only", tenant, c.src.Tenant)
		}
		tenant = c.src.Tenant
	}
	obj.Tenant = tenant
	if v, ok := vals["data"]; ok {
		obj.Data = v
	} else {
		obj.Data = json.RawMessage(m.Body)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, reject(herald.RejectMapping, "the mapped event cannot be encoded: %s", err)
	}
	ev, err := c.decode(raw)
	if err != nil {
		reason := herald.RejectInvalid
		if herald.ErrorCode(err) == herald.CodeSchemaMismatch {
			reason = herald.RejectSchema
		}
		return nil, reject(reason, "%s", herald.CleanLine(err.Error(), 300))
	}
	return ev, nil
}

// eventJSON is the event object Convert hands to the API's decoder. Its
// fields are in the order json.Marshal writes a map's keys (sorted), the
// empty ones left out as they were from the map this replaces, so the
// bytes are the same; a struct encodes without sorting keys or a map per
// message.
type eventJSON struct {
	Data    any    `json:"data"`
	ID      string `json:"id"`
	Key     string `json:"key,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	Type    string `json:"type"`
	Version *int64 `json:"version,omitempty"`
}

// HashID is the event id of a message with neither a mapped id nor a
// broker message id: "sha256:" and the hex SHA-256 of its body, so that
// a redelivery is still a duplicate.
func HashID(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// mappedString returns the mapped value of field as a string: a string as
// is, a number in its shortest form; absent or null is "".
func mappedString(vals map[string]any, field string) (string, *Reject) {
	v, ok := vals[field]
	if !ok || v == nil {
		return "", nil
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", reject(herald.RejectMapping, "mapping.%s must yield a string or a number, got %s", field, jsonKind(v))
}

// integer converts a mapped version: a whole number within ±2^53 (what a
// JSON number keeps exactly as float64) or a string of digits.
func integer(v any) (int64, error) {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, fmt.Errorf("must be a whole number within ±2^53, got %v", x)
		}
		return int64(x), nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("must be an integer, got the string %q", herald.CleanLine(x, 40))
		}
		return n, nil
	}
	return 0, fmt.Errorf("must be an integer, got %s", jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// excerpt is the start of a body for a reject record.
func excerpt(b []byte) string {
	if len(b) > excerptBytes*2 {
		b = b[:excerptBytes*2]
	}
	return herald.CleanLine(string(b), excerptBytes)
}
