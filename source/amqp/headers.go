package amqpsrc

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldhq/herald"
)

// headers turns an AMQP headers table into strings: strings and byte
// arrays as they are (invalid UTF-8 replaced, as the mapping document is
// JSON), numbers in decimal, booleans as true/false, timestamps in
// herald's time format, void as "", nested tables and arrays (x-death,
// for one) as JSON of the same conversion.
func headers(t amqp.Table) map[string]string {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]string, len(t))
	for k, v := range t {
		out[k] = headerString(v)
	}
	return out
}

func headerString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return strings.ToValidUTF8(x, "\uFFFD")
	case []byte:
		return strings.ToValidUTF8(string(x), "\uFFFD")
	case bool:
		return strconv.FormatBool(x)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case amqp.Decimal:
		return decimal(x)
	case time.Time:
		return herald.FormatTime(x)
	case amqp.Table, []any:
		b, err := json.Marshal(jsonValue(x))
		if err != nil {
			return ""
		}
		return string(b)
	}
	return ""
}

// jsonValue converts a nested table or array for JSON: strings stay
// strings, numbers and booleans stay themselves, the rest as headerString.
func jsonValue(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = jsonValue(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = jsonValue(e)
		}
		return a
	case nil, bool, int8, int16, int32, int64, int, uint8, uint16, uint32:
		return x
	case float32, float64:
		return x
	}
	return headerString(v)
}

// decimal renders an AMQP decimal (Value × 10^-Scale) exactly.
func decimal(d amqp.Decimal) string {
	neg := d.Value < 0
	digits := strconv.FormatInt(int64(d.Value), 10)
	if neg {
		digits = digits[1:]
	}
	scale := int(d.Scale)
	if scale > 0 {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}
