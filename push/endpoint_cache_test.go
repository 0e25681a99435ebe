package push

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
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

// The send fast path (sendPath) takes a path only when the mux's patterns
// would route it to the same send, with the same version and token.
func TestSendPathAsMux(t *testing.T) {
	type hit struct {
		version int
		token   string
	}
	var got hit
	mux := http.NewServeMux()
	mux.HandleFunc("POST /wpush/{api}/{token}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("api") {
		case "v1":
			got = hit{1, r.PathValue("token")}
		case "v2":
			got = hit{2, r.PathValue("token")}
		default:
			got = hit{-1, ""}
		}
	})
	mux.HandleFunc("POST /wpush/{token}", func(w http.ResponseWriter, r *http.Request) { got = hit{1, r.PathValue("token")} })
	for _, p := range []string{
		"/wpush/tok", "/wpush/v1/tok", "/wpush/v2/tok", "/wpush/v3/tok", "/wpush/v1", "/wpush/v2", "/wpush/",
		"/wpush/v1/", "/wpush//tok", "/wpush/v1/a/b", "/wpush/v1//", "/wpush/a%2Fb", "/wpush/v2/a%2Fb", "/wpush/a%20b",
		"/wpush/gAAAAABn-_x", "/wpush/v1/./x", "/wpush/../x",
	} {
		r := httptest.NewRequest(http.MethodPost, p, nil)
		v, tok, ok := sendPath(r)
		if !ok {
			continue
		}
		got = hit{}
		mux.ServeHTTP(httptest.NewRecorder(), r)
		if got != (hit{v, tok}) {
			t.Errorf("%s: fast path %d %q, mux %+v", p, v, tok, got)
		}
	}
	if _, _, ok := sendPath(httptest.NewRequest(http.MethodPost, "/wpush/v1/tok", nil)); !ok {
		t.Fatal("the plain v1 path is not taken")
	}
}
