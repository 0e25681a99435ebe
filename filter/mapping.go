package filter

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/heraldhq/herald"
)

// MappingFields are the event fields a source mapping sets, in the order
// CompileMapping checks them.
var MappingFields = []string{"id", "type", "key", "version", "tenant", "data"}

// Mapping is a source's compiled herald.SourceMapping: one JMESPath
// expression per event field, each bounded like a JMESPath filter
// (MaxJMESPathLength, JMESPathMaxCostFactor at compile time,
// JMESPathCostLimit per evaluation). Safe for concurrent use.
type Mapping struct {
	exprs map[string]*jmesMatcher // by field; absent: the field's default
	// readsBody: some expression may read the message document's body
	// (see jmesReadsBody).
	readsBody bool
}

// CompileMapping compiles every expression of m (nil: no expression).
// Errors are *herald.Error with Code herald.CodeInvalidField and Field
// "mapping.<field>".
func CompileMapping(m *herald.SourceMapping) (*Mapping, error) {
	out := &Mapping{exprs: map[string]*jmesMatcher{}}
	if m == nil {
		return out, nil
	}
	src := map[string]string{"id": m.ID, "type": m.Type, "key": m.Key,
		"version": m.Version, "tenant": m.Tenant, "data": m.Data}
	for _, f := range MappingFields {
		s := strings.TrimSpace(src[f])
		if s == "" {
			continue
		}
		matcher, err := compileJMESPath(s)
		if err != nil {
			msg := err.Error()
			var he *herald.Error
			if e, ok := err.(*herald.Error); ok { //nolint:errorlint // compileJMESPath returns *herald.Error unwrapped
				he = e
				msg = he.Message
			}
			return nil, herald.FieldErrorf(herald.CodeInvalidField, "mapping."+f, "mapping.%s: %s", f, msg)
		}
		jm, _ := matcher.(*jmesMatcher)
		out.exprs[f] = jm
		if ast, err := jmesParse(s); err != nil || jmesReadsBody(&ast) {
			out.readsBody = true
		}
	}
	return out, nil
}

// ReadsBody reports whether an expression of m may read the document's
// body: when none does, a source need not decode the body to map it.
func (m *Mapping) ReadsBody() bool { return m != nil && m.readsBody }

// jmesReadsBody reports whether the expression n may read the body of
// the message document (MessageDoc), conservatively: an expression reads
// it unless it is built only of nodes that reach a value by naming it
// (fields, indexes, slices, literals, comparisons, functions, multi-selects,
// pipes) and names no field "body". Anything that takes the current node
// whole (@, projections, flatten, *, filters) counts as reading it, even
// where it only walks headers: such a mapping decodes the body as before.
func jmesReadsBody(n *jmesNode) bool {
	switch n.kind {
	case jkField:
		if n.name == "body" {
			return true
		}
	case jkSubexpression, jkIndexExpression, jkIndex, jkSlice, jkLiteral, jkComparator, jkFunctionExpression,
		jkExpRef, jkMultiSelectHash, jkMultiSelectList, jkKeyValPair, jkOrExpression, jkAndExpression,
		jkNotExpression, jkPipe:
	default:
		return true
	}
	for i := range n.children {
		if jmesReadsBody(&n.children[i]) {
			return true
		}
	}
	return false
}

// Has reports whether field has an expression (else its default applies).
func (m *Mapping) Has(field string) bool { return m != nil && m.exprs[field] != nil }

// MessageDoc builds the document mapping expressions read from a
// message's parts. body is the decoded JSON body (encoding/json's tree:
// numbers are float64, which is what JMESPath compares).
func MessageDoc(body any, headers map[string]string, route map[string]string, messageID string, timestamp string) map[string]any {
	h := make(map[string]any, len(headers))
	for k, v := range headers {
		h[k] = v
	}
	doc := map[string]any{"body": body, "headers": h, "message_id": messageID, "timestamp": timestamp}
	for k, v := range route {
		doc[k] = v
	}
	return doc
}

// Apply evaluates every expression on doc (from MessageDoc) and returns
// the values by field; a field without an expression is absent, one whose
// expression yields null is present as nil. An expression that fails or
// whose cost bound on doc exceeds JMESPathCostLimit is an error naming its
// field.
func (m *Mapping) Apply(doc map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(m.exprs))
	if len(m.exprs) == 0 {
		return out, nil
	}
	size := jmesValueSize(doc)
	sizes := map[string]float64{}
	pathSize := func(p *jmesPath) float64 {
		if s, ok := sizes[p.key]; ok {
			return s
		}
		var v any = doc
		for _, st := range p.steps {
			v = jmesStepValue(v, st)
		}
		s := jmesValueSize(v)
		sizes[p.key] = s
		return s
	}
	for _, f := range MappingFields {
		e := m.exprs[f]
		if e == nil {
			continue
		}
		if e.cost.at(size, pathSize, JMESPathCostLimit) > JMESPathCostLimit {
			costLimitHits.jmespath.Add(1)
			return nil, fmt.Errorf("mapping.%s: the expression's work on this message exceeds the limit of %d units", f, JMESPathCostLimit)
		}
		v, err := e.search(doc)
		if err != nil {
			return nil, fmt.Errorf("mapping.%s: %s", f, herald.CleanLine(err.Error(), 200))
		}
		out[f] = v
	}
	return out, nil
}

// search runs the expression on doc, on a copy when it sorts in place,
// turning a library panic into an error.
func (m *jmesMatcher) search(doc map[string]any) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("evaluation failed: %v", r)
		}
	}()
	var in any = doc
	if m.cost.sortsInPlace {
		b, _ := json.Marshal(doc)
		_ = json.Unmarshal(b, &in)
	}
	return m.expr.Search(in)
}
