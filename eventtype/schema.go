package eventtype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/heraldhq/herald"
)

// schemaURL is the base URL every schema compiles under: .invalid never
// resolves, and a relative reference resolved against it is refused by
// noLoader like any other.
const schemaURL = "https://schema.herald.invalid/event-type.json"

// maxMessage bounds the part of a compiler or validator message an error
// repeats.
const maxMessage = 300

var printer = message.NewPrinter(language.English)

// noLoader refuses every URL: a catalog schema is self-contained. The
// compiler resolves the standard meta-schemas ($schema) from copies
// embedded in the library before it asks a loader, so those still work.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %s: references outside the schema are not supported (use $defs and \"#/$defs/...\")", url)
}

// Schema is a compiled event type schema.
type Schema struct {
	s *jsonschema.Schema
}

// Compile compiles a JSON Schema given as JSON text (draft 2020-12 unless
// $schema names another). Errors are *herald.Error with CodeInvalidSchema
// and Field "schema".
func Compile(raw json.RawMessage) (sch *Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			sch, err = nil, invalidSchema("the schema could not be compiled: %v", r)
		}
	}()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, invalidSchema("schema is not valid JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, invalidSchema("%v", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, invalidSchema("%s", compileMessage(err))
	}
	return &Schema{s: s}, nil
}

func invalidSchema(format string, args ...any) *herald.Error {
	return herald.FieldErrorf(herald.CodeInvalidSchema, "schema", "%s", herald.CleanLine(fmt.Sprintf(format, args...), maxMessage))
}

// compileMessage is the compiler's error without the base URL noise.
func compileMessage(err error) string {
	var se *jsonschema.SchemaValidationError
	if errors.As(err, &se) && se.Err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(se.Err, &ve) {
			loc, msg := leaf(ve)
			return fmt.Sprintf("schema is not a valid JSON Schema: at %s: %s", pointer(loc), msg)
		}
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "'"+schemaURL+"#", "'#")
	msg = strings.ReplaceAll(msg, schemaURL, "the schema")
	return msg
}

// Validate checks data against the schema. path is the JSON path of data
// in the request ("data", "events[3].data"); a mismatch is a
// *herald.Error with CodeSchemaMismatch whose Field is the path of the
// value at fault ("data.amount").
func (sch *Schema) Validate(data json.RawMessage, path string) error {
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return herald.FieldErrorf(herald.CodeSchemaMismatch, path, "%s is not valid JSON", path)
	}
	err = sch.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return herald.FieldErrorf(herald.CodeSchemaMismatch, path, "%s: %s", path, herald.CleanLine(err.Error(), maxMessage))
	}
	loc, msg := leaf(ve)
	field := path + jsonPath(loc)
	return herald.FieldErrorf(herald.CodeSchemaMismatch, field, "%s: %s", field, herald.CleanLine(msg, maxMessage))
}

// leaf returns the deepest cause of e (the most specific value at
// fault; the first such on a tie) with its message.
func leaf(e *jsonschema.ValidationError) ([]string, string) {
	best := e
	var walk func(*jsonschema.ValidationError)
	walk = func(x *jsonschema.ValidationError) {
		if len(x.Causes) == 0 {
			if len(x.InstanceLocation) > len(best.InstanceLocation) || len(best.Causes) > 0 {
				best = x
			}
			return
		}
		for _, c := range x.Causes {
			walk(c)
		}
	}
	walk(e)
	msg := "does not conform"
	if best.ErrorKind != nil {
		msg = best.ErrorKind.LocalizedString(printer)
	}
	msg = strings.ReplaceAll(msg, schemaURL, "the schema")
	return best.InstanceLocation, msg
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// jsonPath renders a location as ".key[3]" (keys that are not plain
// identifiers quoted: `["a.b"]`).
func jsonPath(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil && !strings.HasPrefix(tok, "+") {
			// Instance locations are array indexes or object keys; a
			// key made of digits reads the same either way here.
			b.WriteString("[" + tok + "]")
			continue
		}
		if plainKey.MatchString(tok) {
			b.WriteString("." + tok)
			continue
		}
		q, _ := json.Marshal(tok)
		b.WriteString("[" + string(q) + "]")
	}
	return b.String()
}

// pointer renders a location as a JSON pointer ("/properties/a").
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "the top level"
	}
	r := strings.NewReplacer("~", "~0", "/", "~1")
	var b strings.Builder
	for _, tok := range loc {
		b.WriteString("/" + r.Replace(tok))
	}
	return b.String()
}

// Check compiles et's schema when it has one and checks its example
// against it: the API's answer to a create or update, after
// herald.CheckEventType. A non-conforming example is CodeSchemaMismatch
// with Field "example..." naming the value at fault.
func Check(et *herald.EventType) (*Schema, error) {
	if len(et.Schema) == 0 {
		return nil, nil
	}
	sch, err := Compile(et.Schema)
	if err != nil {
		return nil, err
	}
	if len(et.Example) > 0 {
		if err := sch.Validate(et.Example, "example"); err != nil {
			var he *herald.Error
			if errors.As(err, &he) {
				he.Message = "the example does not conform to the schema: " + he.Message
			}
			return nil, err
		}
	}
	return sch, nil
}
