package push

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// A cached token answers only for the version it was read under, failures
// are never remembered, and the cache stays within its size.
func TestEndpointCache(t *testing.T) {
	k, err := ParseKeys(GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	ec := newEndpointCache(4)
	want := &Endpoint{UAID: strings.Repeat("0f", 16), ChannelID: "0a4a0f4e-57b2-4d3b-9b6a-6f0b9d6f1c2e"}
	v1, err := k.EndpointToken(want)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // a miss, then a hit
		got, err := ec.parse(k, v1, 1)
		if err != nil || got.UAID != want.UAID || got.ChannelID != want.ChannelID || got.KeyHash != nil {
			t.Fatalf("v1 token: %+v, %v", got, err)
		}
	}
	if _, err := ec.parse(k, v1, 0); err != nil { // /wpush/ is version 1
		t.Fatalf("v1 token as version 0: %v", err)
	}
	if _, err := ec.parse(k, v1, 2); err == nil {
		t.Fatal("a cached v1 token was accepted on a /v2/ path")
	}
	sum := sha256.Sum256([]byte("app server key"))
	v2, err := k.EndpointToken(&Endpoint{UAID: want.UAID, ChannelID: want.ChannelID, KeyHash: sum[:]})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ec.parse(k, v2, 2); err != nil || string(got.KeyHash) != string(sum[:]) {
		t.Fatalf("v2 token: %+v, %v", got, err)
	}
	forged := v1[:len(v1)-2] + "AA"
	for range 2 {
		if _, err := ec.parse(k, forged, 1); err == nil {
			t.Fatal("a forged token was accepted")
		}
	}
	if n := ec.c.Len(); n != 2 {
		t.Fatalf("%d entries, want 2 (failures are not cached)", n)
	}
	for i := range 10 {
		tok, err := k.EndpointToken(&Endpoint{UAID: want.UAID, ChannelID: "0a4a0f4e-57b2-4d3b-9b6a-6f0b9d6f1c2" + string(rune('0'+i))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ec.parse(k, tok, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := ec.c.Len(); n != 4 {
		t.Fatalf("%d entries, want the size 4", n)
	}
}
