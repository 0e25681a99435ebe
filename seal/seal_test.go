package seal_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/seal"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, seal.KeySize) }

func ring(t *testing.T, keys ...[]byte) *seal.Ring {
	t.Helper()
	r, err := seal.NewRing(keys...)
	require.NoError(t, err)
	return r
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	a, b := key(1), key(2)
	ringA, ringBA, ringB := ring(t, a), ring(t, b, a), ring(t, b)
	sealedA, err := ringA.Seal("whsec_x", "sub_1")
	require.NoError(t, err)
	tests := []struct {
		name    string
		ring    *seal.Ring
		stored  string
		aad     string
		want    string
		wantErr error
	}{
		{"plain text passes through", ringA, "whsec_plain", "sub_1", "whsec_plain", nil},
		{"plain text without a ring", nil, "whsec_plain", "sub_1", "whsec_plain", nil},
		{"own key", ringA, sealedA, "sub_1", "whsec_x", nil},
		{"old key still decrypts", ringBA, sealedA, "sub_1", "whsec_x", nil},
		{"key not in the ring", ringB, sealedA, "sub_1", "", seal.ErrUnknownKey},
		{"no ring", nil, sealedA, "sub_1", "", seal.ErrNoKey},
		{"copied to another row", ringA, sealedA, "sub_2", "", seal.ErrDecrypt},
		{"tampered", ringA, sealedA[:len(sealedA)-2] + flip(sealedA[len(sealedA)-2:]), "sub_1", "", seal.ErrDecrypt},
		{"malformed", ringA, "enc:v1:zz", "sub_1", "", seal.ErrMalformed},
		{"unknown version", ringA, "enc:v9:" + sealedA[7:], "sub_1", "", seal.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.ring.Open(tt.stored, tt.aad)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// flip changes a base64url tail so the tag no longer matches.
func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

func TestSealFormat(t *testing.T) {
	t.Parallel()
	r := ring(t, key(1), key(2))
	v1, err := r.Seal("secret", "sub_1")
	require.NoError(t, err)
	v2, err := r.Seal("secret", "sub_1")
	require.NoError(t, err)
	require.NotEqual(t, v1, v2, "a fresh nonce every time")
	require.True(t, strings.HasPrefix(v1, "enc:v1:"+seal.KeyID(key(1))+":"), v1)
	require.NotContains(t, v1, "secret")
	require.Equal(t, seal.KeyID(key(1)), seal.KeyIDOf(v1))
	require.True(t, r.Current(v1))
	require.False(t, ring(t, key(2), key(1)).Current(v1))
	require.False(t, r.Current("whsec_plain"))
	require.Equal(t, []string{seal.KeyID(key(1)), seal.KeyID(key(2))}, r.IDs())

	var nilRing *seal.Ring
	plain, err := nilRing.Seal("secret", "sub_1")
	require.NoError(t, err)
	require.Equal(t, "secret", plain)
	require.True(t, nilRing.Current("whsec_plain"))
}

func TestNewRingErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		keys [][]byte
		want string
	}{
		{"none", nil, "at least one key"},
		{"short", [][]byte{key(1)[:16]}, "16 bytes, want 32"},
		{"twice", [][]byte{key(1), key(1)}, "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := seal.NewRing(tt.keys...)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	gen, err := seal.GenerateKey()
	require.NoError(t, err)
	std := "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
	tests := []struct {
		name    string
		list    string
		want    int
		wantErr string
	}{
		{"generated", gen, 1, ""},
		{"two with spaces", std + " , " + gen, 2, ""},
		{"unpadded", strings.TrimRight(std, "="), 1, ""},
		{"empty", "", 0, ""},
		{"not base64", "not a key!", 0, "not base64"},
		{"wrong length", "AQEB", 0, "3 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			keys, err := seal.ParseKeyList(tt.list)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, keys, tt.want)
		})
	}
}

func TestParseKeyFile(t *testing.T) {
	t.Parallel()
	a, err := seal.GenerateKey()
	require.NoError(t, err)
	b, err := seal.GenerateKey()
	require.NoError(t, err)
	keys, err := seal.ParseKeyFile([]byte("# new key first\n" + a + "\n\n  # old\n" + b + "\n"))
	require.NoError(t, err)
	require.Len(t, keys, 2)
	ka, _ := seal.ParseKey(a)
	require.Equal(t, ka, keys[0])

	_, err = seal.ParseKeyFile([]byte(a + "\nbogus\n"))
	require.ErrorContains(t, err, "line 2")
}

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		sealed  bool
		wantErr bool
	}{
		{"plain", "whsec_abc", false, false},
		{"empty", "", false, false},
		{"prefix only", "enc:", true, true},
		{"no data", "enc:v1:0123abcd:", true, true},
		{"short data", "enc:v1:0123abcd:AAAA", true, true},
		{"bad id", "enc:v1:0123ABCD:" + strings.Repeat("A", 40), true, true},
		{"missing colon", "enc:v1:0123abcdX" + strings.Repeat("A", 40), true, true},
		{"padding refused", "enc:v1:0123abcd:" + strings.Repeat("A", 38) + "==", true, true},
		{"ok", "enc:v1:0123abcd:" + strings.Repeat("A", 40), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, sealed, err := seal.Parse(tt.in)
			require.Equal(t, tt.sealed, sealed)
			if tt.wantErr {
				require.ErrorIs(t, err, seal.ErrMalformed)
				return
			}
			require.NoError(t, err)
			if sealed {
				require.Equal(t, "0123abcd", v.KeyID)
			}
		})
	}
}

// FuzzParse checks the parser and Open never panic on any stored text, and
// that anything Parse accepts names a key id KeyIDOf agrees on. The seeds
// run as regression tests under plain go test.
func FuzzParse(f *testing.F) {
	r, err := seal.NewRing(key(1))
	require.NoError(f, err)
	good, err := r.Seal("whsec_seed", "sub_1")
	require.NoError(f, err)
	for _, s := range []string{"", "whsec_abc", "enc:", "enc:v1:", "enc:v1:0123abcd:", good,
		good[:len(good)-1], "enc:v1:" + seal.KeyID(key(1)) + ":" + strings.Repeat("_", 40), "enc:v2:x:y"} {
		f.Add(s, "sub_1")
	}
	f.Fuzz(func(t *testing.T, stored, aad string) {
		v, sealed, err := seal.Parse(stored)
		if sealed != strings.HasPrefix(stored, "enc:") {
			t.Fatalf("sealed=%v for %q", sealed, stored)
		}
		if sealed && err == nil && v.KeyID != seal.KeyIDOf(stored) {
			t.Fatalf("key id %q vs %q", v.KeyID, seal.KeyIDOf(stored))
		}
		got, err := r.Open(stored, aad)
		if !sealed && (err != nil || got != stored) {
			t.Fatalf("plain text %q changed: %q, %v", stored, got, err)
		}
		if sealed && err == nil && (got != "whsec_seed" || aad != "sub_1") {
			// Only a value the ring sealed opens, and only with its aad
			// (forging one would mean breaking AES-GCM).
			t.Fatalf("forged value opened: %q (aad %q) = %q", stored, aad, got)
		}
	})
}
