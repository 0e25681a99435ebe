package httpapi

import (
	"strings"
	"testing"
)

// publishBody is a publish request like herald bench's: 1 KiB of data.
var publishBody = `{"type":"bench.event","data":{"bench_t":1234567890123456789,"pad":"` + strings.Repeat("x", 1000) + `"}}`

// BenchmarkDecodeEvent decodes one publish body (POST /v1/events).
func BenchmarkDecodeEvent(b *testing.B) {
	body := []byte(publishBody)
	for b.Loop() {
		if _, err := decodeEvent(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBatch decodes a 100-event batch body (POST
// /v1/events/batch); ns/op divided by 100 is the cost per event.
func BenchmarkDecodeBatch(b *testing.B) {
	items := make([]string, 100)
	for i := range items {
		items[i] = publishBody
	}
	body := []byte(`{"events":[` + strings.Join(items, ",") + `]}`)
	for b.Loop() {
		if _, _, _, err := decodeBatch(body); err != nil {
			b.Fatal(err)
		}
	}
}
