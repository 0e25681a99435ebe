package source

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	return &Converter{src: src, mapping: m, decode: decode, maxBody: maxBody, route: RouteField(src.Type)}, nil
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
	var body any
	if err := json.Unmarshal(m.Body, &body); err != nil {
		return nil, reject(herald.RejectNotJSON, "body is not JSON: %s", herald.CleanLine(err.Error(), 160))
	}
	vals := map[string]any{}
	if c.mapping.Has("id") || c.mapping.Has("type") || c.mapping.Has("key") || c.mapping.Has("version") ||
		c.mapping.Has("tenant") || c.mapping.Has("data") {
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
	obj := map[string]any{}

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
	obj["id"] = id

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
	obj["type"] = typ

	if key, rj := mappedString(vals, "key"); rj != nil {
		return nil, rj
	} else if key != "" {
		obj["key"] = key
	}
	if v, ok := vals["version"]; ok && v != nil {
		n, err := integer(v)
		if err != nil {
			return nil, reject(herald.RejectMapping, "mapping.version %s", err)
		}
		obj["version"] = n
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
	if tenant != "" {
		obj["tenant"] = tenant
	}
	if v, ok := vals["data"]; ok {
		obj["data"] = v
	} else {
		obj["data"] = json.RawMessage(m.Body)
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
