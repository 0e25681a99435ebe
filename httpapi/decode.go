package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/heraldhq/herald"
)

// Reading a request: its body within a limit, then its JSON, field by
// field, each error naming the field's path. The decoders of resources
// (decodeEvent, decodeSubscription) live with their resource.

// readBody reads r's body, at most limit bytes. A larger body is
// body_too_large without being read further; a body that does not arrive
// before the request's read deadline (ReadDeadline) is request_timeout.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	var (
		b   []byte
		err error
	)
	if n := r.ContentLength; n > 0 && n <= limit {
		b, err = readAnnounced(r.Body, n)
	} else {
		b, err = io.ReadAll(r.Body)
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, herald.Errorf(herald.CodeBodyTooLarge, "request body exceeds the limit of %d bytes", limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, &herald.Error{Code: herald.CodeRequestTimeout, Err: err,
				Message: "the request body did not arrive in time; send it at once, or in smaller requests"}
		}
		return nil, &herald.Error{Code: herald.CodeInvalidJSON, Message: "error reading the request body", Err: err}
	}
	return b, nil
}

// preallocBodyBytes is the most readAnnounced allocates before the bytes
// arrive (64 KiB): a body up to it (an ordinary event) is read in one
// allocation of its announced size, instead of ReadAll's growing copies;
// a larger one grows by doubling as it arrives, so a client that
// announces 1 MiB and sends one byte holds 64 KiB, not 1 MiB, and memory
// stays within twice what was received.
const preallocBodyBytes = 64 << 10

// readAnnounced reads a body of announced length n (net/http holds the
// body to it: fewer bytes end in io.ErrUnexpectedEOF).
func readAnnounced(body io.Reader, n int64) ([]byte, error) {
	b := make([]byte, 0, min(n, preallocBodyBytes))
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			grown := make([]byte, len(b), min(n, 2*int64(cap(b))))
			copy(grown, b)
			b = grown
		}
		m, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			if int64(len(b)) < n {
				return nil, io.ErrUnexpectedEOF
			}
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// smallLimit is limit, or MaxBodyBytes when that is lower.
func (s *server) smallLimit(limit int64) int64 {
	return min(limit, s.cfg.MaxBodyBytes)
}

// object is one JSON object decoded a level deep, with its JSON path, so
// that every error about one of its fields can name that field's path.
type object struct {
	path   string
	fields map[string]json.RawMessage
}

// parseBody parses a request body that must hold exactly one JSON object.
// Malformed JSON is invalid_json with the line and column of the fault;
// trailing data after the object is malformed JSON too. A field whose value
// is not valid UTF-8 is invalid_field naming it (see validUTF8).
func parseBody(body []byte) (object, error) {
	o, err := parseJSONBody(body)
	if err != nil {
		return object{}, err
	}
	if err := o.validUTF8(); err != nil {
		return object{}, err
	}
	return o, nil
}

// parseJSONBody is parseBody without the UTF-8 check, for the batch body,
// whose items are checked one by one (so one bad item is rejected alone).
func parseJSONBody(body []byte) (object, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return object{}, herald.Errorf(herald.CodeInvalidJSON, "request body is empty; expected a JSON object")
	}
	if validJSON(body) {
		if fields, ok := splitObject(body); ok {
			return object{fields: fields}, nil
		}
	}
	// Not valid, or not an object: json.Unmarshal says where and what.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := position(body, syn.Offset)
			return object{}, &herald.Error{Code: herald.CodeInvalidJSON, Err: err,
				Message: fmt.Sprintf("malformed JSON at line %d, column %d (byte %d): %s",
					line, col, syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))}
		}
		return object{}, &herald.Error{Code: herald.CodeInvalidJSON, Err: err,
			Message: "request body must be a JSON object, got " + jsonKind(trimmed)}
	}
	if fields == nil { // the body was null
		return object{}, herald.Errorf(herald.CodeInvalidJSON, "request body must be a JSON object, got null")
	}
	return object{fields: fields}, nil
}

// position turns a byte offset into a 1-based line and column. The offset
// of a SyntaxError is the number of bytes read when the fault was found,
// so the fault is the byte before it.
func position(b []byte, offset int64) (line, col int) {
	if offset > int64(len(b)) {
		offset = int64(len(b))
	}
	if offset > 0 {
		offset--
	}
	line, col = 1, 1
	for _, c := range b[:offset] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// parseObject parses raw (already known to be valid JSON) as the object at
// path, with parseBody's UTF-8 check.
func parseObject(raw json.RawMessage, path string) (object, error) {
	// raw is a value of an object parseBody or parseObject split, so it
	// is valid JSON.
	fields, ok := splitObject(raw)
	if len(raw) == 0 || raw[0] != '{' || !ok {
		return object{}, herald.FieldErrorf(herald.CodeInvalidField, path, "%s must be a JSON object, got %s", path, jsonKind(raw))
	}
	o := object{path: path, fields: fields}
	if err := o.validUTF8(); err != nil {
		return object{}, err
	}
	return o, nil
}

// validUTF8 fails with invalid_field on the first field of o (in sorted
// order) whose raw value is not valid UTF-8. encoding/json accepts such
// bytes: it turns them into U+FFFD when it decodes a string, and keeps them
// as they are in a json.RawMessage (event data, metadata), which a store
// then refuses or keeps as garbage. JSON text is UTF-8 (RFC 8259), so the
// client is told instead.
func (o object) validUTF8() error {
	var bad []string
	for k, raw := range o.fields {
		if !utf8.Valid(raw) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	path := o.at(bad[0])
	return herald.FieldErrorf(herald.CodeInvalidField, path, "%s must be valid UTF-8", path)
}

// jsonKind names the JSON type of raw for error messages.
func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// at returns the JSON path of field name inside o.
func (o object) at(name string) string {
	if o.path == "" {
		return name
	}
	return o.path + "." + name
}

// allow fails with unknown_field on the first key of o (in sorted order, so
// the answer is stable) that is not in names.
func (o object) allow(names ...string) error {
	var unknown []string
	for k := range o.fields {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return herald.FieldErrorf(herald.CodeUnknownField, o.at(unknown[0]), "unknown field %s", quote(o.at(unknown[0])))
}

// has reports whether name is present (null included).
func (o object) has(name string) bool {
	_, ok := o.fields[name]
	return ok
}

// get returns the value of name; absent and null are both "not set".
func (o object) get(name string) (json.RawMessage, bool) {
	raw, ok := o.fields[name]
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// str decodes the string field name into dst; set is false when it is
// absent or null (dst is left alone).
func (o object) str(name string, dst *string) (set bool, err error) {
	raw, ok := o.get(name)
	if !ok {
		return false, nil
	}
	if raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
		return false, typeError(o.at(name), "a string", raw)
	}
	if strings.ContainsRune(*dst, 0) {
		return false, noNUL(o.at(name))
	}
	return true, nil
}

// noNUL is the error for a string holding NUL (\u0000), which no text
// column of PostgreSQL can store: refused in every string field.
func noNUL(path string) error {
	return herald.FieldErrorf(herald.CodeInvalidField, path, "%s must not contain NUL (\\u0000)", path)
}

// boolean decodes the boolean field name; absent and null are false.
func (o object) boolean(name string) (bool, error) {
	raw, ok := o.get(name)
	if !ok {
		return false, nil
	}
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, typeError(o.at(name), "a boolean", raw)
}

// integer decodes the integer field name into dst. Floats (even 1.0), numbers
// in exponent form and numeric strings are refused: integers here are
// counts and ids, where a fractional part is always a client bug.
func (o object) integer(name string, dst *int64) (set bool, err error) {
	raw, ok := o.get(name)
	if !ok {
		return false, nil
	}
	n, err := parseInt(raw)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return false, herald.FieldErrorf(herald.CodeInvalidField, o.at(name), "%s is out of range", o.at(name))
		}
		return false, typeError(o.at(name), "an integer", raw)
	}
	*dst = n
	return true, nil
}

func parseInt(raw json.RawMessage) (int64, error) {
	s := string(raw)
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) || strings.ContainsAny(s, ".eE") {
		return 0, errors.New("not an integer")
	}
	return strconv.ParseInt(s, 10, 64)
}

// stringList decodes an array of strings; each bad element is named by its
// index ("event_types[2]").
func (o object) stringList(name string) (list []string, set bool, err error) {
	raw, ok := o.get(name)
	if !ok {
		return nil, false, nil
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, false, typeError(o.at(name), "an array of strings", raw)
	}
	list = make([]string, len(items))
	for i, it := range items {
		if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &list[i]) != nil {
			return nil, false, typeError(fmt.Sprintf("%s[%d]", o.at(name), i), "a string", it)
		}
		if strings.ContainsRune(list[i], 0) {
			return nil, false, noNUL(fmt.Sprintf("%s[%d]", o.at(name), i))
		}
	}
	return list, true, nil
}

func typeError(path, want string, raw json.RawMessage) error {
	return herald.FieldErrorf(herald.CodeInvalidField, path, "%s must be %s, got %s", path, want, jsonKind(raw))
}

func invalid(path, format string, args ...any) error {
	return herald.FieldErrorf(herald.CodeInvalidField, path, "%s %s", path, fmt.Sprintf(format, args...))
}

// compactJSON returns raw, a valid JSON value (parseBody checked it), with
// insignificant whitespace removed. Most producers send compact JSON
// already (JSON.stringify, json.Marshal): then raw is returned as it is,
// after one byte loop, instead of going through json.Compact's state
// machine (measured at 2–3% of the node's CPU per 1 KiB event).
func compactJSON(raw json.RawMessage) (json.RawMessage, error) {
	if herald.IsCompactJSON(raw) {
		return raw, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Splitting valid JSON. json.Unmarshal into map[string]json.RawMessage
// scans a document twice (a validity pass, then the decode) and a batch
// body was decoded three levels deep that way: body, events array, each
// item, six scans of every byte (24 µs per event of a 100-event batch,
// more than storing it). The request body is validated once instead
// (validJSON: json.Valid's answer, five times faster); splitObject and
// splitArray then cut it into raw values with a byte loop that only tracks
// strings and nesting. They require valid JSON and give the same fields
// and values json.Unmarshal would (FuzzSplitJSON).

// splitObject returns the fields of the JSON object b (valid JSON), or
// false when b is not an object. Values are slices of b; a repeated key
// keeps its last value, as json.Unmarshal does.
func splitObject(b []byte) (map[string]json.RawMessage, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	fields := map[string]json.RawMessage{}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return fields, true
	}
	for i < len(b) {
		ks := i
		i = skipString(b, i)
		key, ok := jsonKey(b[ks:i])
		if !ok {
			return nil, false
		}
		i = skipSpace(b, skipSpace(b, i)+1) // past ':'
		vs := i
		i = skipValue(b, i)
		fields[key] = b[vs:i:i]
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			break // '}'
		}
		i = skipSpace(b, i+1)
	}
	return fields, true
}

// splitArray returns the elements of the JSON array b (valid JSON), or
// false when b is not an array.
func splitArray(b []byte) ([]json.RawMessage, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	items := []json.RawMessage{}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return items, true
	}
	for i < len(b) {
		vs := i
		i = skipValue(b, i)
		items = append(items, b[vs:i:i])
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			break // ']'
		}
		i = skipSpace(b, i+1)
	}
	return items, true
}

// jsonKey decodes a quoted key. Keys with escapes or non-ASCII bytes go
// through json.Unmarshal, so invalid UTF-8 becomes U+FFFD exactly as
// there.
func jsonKey(q []byte) (string, bool) {
	if len(q) < 2 {
		return "", false
	}
	plain := true
	for _, c := range q[1 : len(q)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(q[1 : len(q)-1]), true
	}
	var k string
	if json.Unmarshal(q, &k) != nil {
		return "", false
	}
	return k, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index past the string that starts at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index past the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // a number, true, false or null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}
