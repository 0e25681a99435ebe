package push

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/fernet/fernet-go"
)

// The sealer's tokens are Fernet tokens: fernet-go reads them back, with
// their time, under the key that made them and under no other.
func TestSealerTokensReadByFernet(t *testing.T) {
	k, err := ParseKeys(GenerateKey() + "," + GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	other, err := ParseKeys(GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	seen := map[string]bool{}
	for n := 0; n <= 300; n += 7 {
		msg := bytes.Repeat([]byte{byte('a' + n%26)}, n)
		tok, err := k.seal.seal(msg, at)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(tok, "=+/") {
			t.Fatalf("token %q is not unpadded URL-safe base64", tok)
		}
		if seen[tok] {
			t.Fatalf("the same token twice: %q (IVs must differ)", tok)
		}
		seen[tok] = true
		padded := tok + strings.Repeat("=", (4-len(tok)%4)%4)
		got := fernet.VerifyAndDecrypt([]byte(padded), 0, k.keys[:1])
		if got == nil || !bytes.Equal(got, msg) {
			t.Fatalf("len %d: fernet-go read %q", n, got)
		}
		if fernet.VerifyAndDecrypt([]byte(padded), 0, other.keys) != nil {
			t.Fatalf("len %d: another key read the token", n)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(tok)
		if raw[0] != 0x80 {
			t.Fatalf("version byte %#x", raw[0])
		}
		if got := k.decrypt(tok); !bytes.Equal(got, msg) {
			t.Fatalf("len %d: Keys.decrypt read %q", n, got)
		}
	}
	// The time is the one given (a TTL check against it holds).
	tok, _ := k.seal.seal([]byte("x"), time.Now().Add(-time.Hour))
	tok += strings.Repeat("=", (4-len(tok)%4)%4)
	if fernet.VerifyAndDecrypt([]byte(tok), time.Minute, k.keys) != nil {
		t.Fatal("an hour-old token passed a one-minute TTL")
	}
	if fernet.VerifyAndDecrypt([]byte(tok), 2*time.Hour, k.keys) == nil {
		t.Fatal("an hour-old token failed a two-hour TTL")
	}
}

func BenchmarkMessageID(b *testing.B) {
	k, err := ParseKeys(GenerateKey())
	if err != nil {
		b.Fatal(err)
	}
	ref := &MessageRef{UAID: strings.Repeat("ab", 16), ChannelID: "0a4a0f4e-57b2-4d3b-9b6a-6f0b9d6f1c2e", ID: "pm_01JDEXAMPLE0000000000000"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.MessageID(ref); err != nil {
			b.Fatal(err)
		}
	}
}
