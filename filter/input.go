package filter

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"sync"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/heraldhq/herald"
)

// Input is an event prepared once for matching against many filters: the
// event data is decoded once, whatever number of subscriptions look at it.
// An Input is read-only after NewInput and safe for concurrent use.
//
// Decoded JSON numbers are int64 when the literal is an integer that fits
// (no fraction, no exponent), float64 otherwise, so that large ids keep
// their precision and CEL sees integers as int. JMESPath, which only knows
// float64, gets its own copy of the tree, converted on first use.
type Input struct {
	typ        string
	key        string
	version    int64
	hasVersion bool

	// envelope is {"id","type","timestamp","key","version","data"} with
	// native numbers; data is envelope["data"].
	envelope map[string]any
	data     any

	// CEL values, adapted once: CEL would otherwise wrap the maps again
	// on every evaluation.
	celData  ref.Val
	celEvent ref.Val

	jmesOnce     sync.Once
	jmesEnvelope map[string]any
	jmesSize     float64 // jmesValueSize(jmesEnvelope)

	// jmesPathSizes caches the sizes of root paths (jmesPath.key) that
	// JMESPath cost bounds read; several filters often read the same.
	jmesMu        sync.Mutex
	jmesPathSizes map[string]float64
}

// NewInput prepares ev for matching. Data that is not valid JSON is treated
// as null, like (*herald.Event).Envelope does; the API refuses such events
// before they get here. A nil ev gives the input of an empty event.
func NewInput(ev *herald.Event) *Input {
	if ev == nil {
		ev = &herald.Event{}
	}
	in := &Input{typ: ev.Type, key: ev.Key}
	if ev.Version != nil {
		in.version, in.hasVersion = *ev.Version, true
	}
	in.data = decodeJSON(ev.Data)
	env := ev.EnvelopeWith(in.data)
	in.envelope = env
	in.celData = types.DefaultTypeAdapter.NativeToValue(in.data)
	in.celEvent = types.DefaultTypeAdapter.NativeToValue(env)
	return in
}

// jmesDoc returns the envelope with every number as float64, the only
// numeric type go-jmespath compares, and its size for the cost bound.
func (in *Input) jmesDoc() (map[string]any, float64) {
	in.jmesOnce.Do(func() {
		in.jmesEnvelope, _ = toFloatTree(in.envelope).(map[string]any)
		in.jmesSize = jmesValueSize(in.jmesEnvelope)
	})
	return in.jmesEnvelope, in.jmesSize
}

// jmesPathSize returns the size of the value p reaches in the JMESPath
// view of the envelope (1, the size of null, when it reaches nothing).
func (in *Input) jmesPathSize(p *jmesPath) float64 {
	in.jmesMu.Lock()
	size, ok := in.jmesPathSizes[p.key]
	in.jmesMu.Unlock()
	if ok {
		return size
	}
	doc, _ := in.jmesDoc()
	var v any = doc
	for _, st := range p.steps {
		v = jmesStepValue(v, st)
	}
	size = jmesValueSize(v)
	in.jmesMu.Lock()
	if in.jmesPathSizes == nil {
		in.jmesPathSizes = map[string]float64{}
	}
	in.jmesPathSizes[p.key] = size
	in.jmesMu.Unlock()
	return size
}

// jmesStepValue applies one field or index step as go-jmespath does.
func jmesStepValue(v any, st jmesStep) any {
	if !st.isIndex {
		m, _ := v.(map[string]any)
		return m[st.name]
	}
	l, ok := v.([]any)
	if !ok {
		return nil
	}
	i := st.index
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return nil
	}
	return l[i]
}

// decodeJSON decodes raw into a tree of map[string]any, []any, string,
// bool, nil, int64 and float64. Empty or invalid input is nil.
func decodeJSON(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	return nativeNumbers(v)
}

// nativeNumbers replaces every json.Number in v, in place, by int64 or
// float64. The tree was just decoded and is not shared yet.
func nativeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		return parseNumber(string(x))
	case map[string]any:
		for k, e := range x {
			switch e.(type) {
			case json.Number, map[string]any, []any:
				x[k] = nativeNumbers(e)
			}
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = nativeNumbers(e)
		}
		return x
	}
	return v
}

// parseNumber turns a JSON number literal into int64 when it is an integer
// literal that fits, else float64 (±Inf for literals beyond float64 range).
func parseNumber(s string) any {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return s // cannot happen for a literal the JSON decoder accepted
	}
	return f
}

// toFloatTree copies v with int64 turned into float64.
func toFloatTree(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = toFloatTree(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = toFloatTree(e)
		}
		return s
	}
	return v
}
