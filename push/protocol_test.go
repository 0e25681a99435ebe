package push

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/store"
)

func TestDecodeClientMessage(t *testing.T) {
	t.Parallel()
	const chid = "0c9c7b42-4d5e-4f1c-9d2a-1f3e5a7b9c0d"
	for _, tc := range []struct {
		name string
		in   string
		want *clientMessage
		code int // close code when decoding fails
	}{
		{"empty object is ping", `{}`, &clientMessage{Type: msgPing}, 0},
		{"empty object with space", " {\n } ", &clientMessage{Type: msgPing}, 0},
		{"ping", `{"messageType":"ping"}`, &clientMessage{Type: msgPing}, 0},
		{"hello", `{"messageType":"hello","uaid":"ABC","use_webpush":true,"channelIDs":["x"],"broadcasts":{"a":"1"}}`,
			&clientMessage{Type: msgHello, UAID: "ABC", Broadcasts: map[string]string{"a": "1"}}, 0},
		{"hello null uaid", `{"messageType":"hello","uaid":null}`, &clientMessage{Type: msgHello}, 0},
		{"register", `{"messageType":"register","channelID":"` + chid + `","key":"BAAA"}`,
			&clientMessage{Type: msgRegister, ChannelID: chid, Key: ptr("BAAA")}, 0},
		{"register keeps the channelID as sent", `{"messageType":"register","channelID":"X"}`,
			&clientMessage{Type: msgRegister, ChannelID: "X"}, 0},
		{"unregister normalises", `{"messageType":"unregister","channelID":"0C9C7B424D5E4F1C9D2A1F3E5A7B9C0D","code":201}`,
			&clientMessage{Type: msgUnregister, ChannelID: chid, Code: 201}, 0},
		{"ack", `{"messageType":"ack","updates":[{"channelID":"` + chid + `","version":"v","code":102},{"channelID":"` + chid + `","version":"w"}]}`,
			&clientMessage{Type: msgAck, Updates: []ackUpdate{{chid, "v", 102}, {chid, "w", 0}}}, 0},
		{"nack", `{"messageType":"nack","version":"v","code":301}`, &clientMessage{Type: msgNack, Version: "v", Code: 301}, 0},
		{"broadcast_subscribe", `{"messageType":"broadcast_subscribe","broadcasts":{"a":"2"}}`,
			&clientMessage{Type: msgBroadcastSubscribe, Broadcasts: map[string]string{"a": "2"}}, 0},
		{"unknown type", `{"messageType":"urgency","min":"high"}`, nil, closeUnsupported},
		{"empty type", `{"messageType":""}`, nil, closeUnsupported},
		{"no type", `{"uaid":"x"}`, nil, closeProtocol},
		{"type not a string", `{"messageType":1}`, nil, closeProtocol},
		{"not an object", `[]`, nil, closeProtocol},
		{"truncated", `{"messageType":"hello"`, nil, closeProtocol},
		{"not JSON", `hello`, nil, closeProtocol},
		{"empty", ``, nil, closeProtocol},
		{"broadcast values not strings", `{"messageType":"hello","broadcasts":{"a":1}}`, nil, closeProtocol},
		{"updates not a list", `{"messageType":"ack","updates":{}}`, nil, closeProtocol},
		{"ack bad channelID", `{"messageType":"ack","updates":[{"channelID":"x","version":"v"}]}`, nil, closeProtocol},
		{"unregister bad channelID", `{"messageType":"unregister","channelID":"x"}`, nil, closeProtocol},
		{"code not a number", `{"messageType":"nack","version":"v","code":"301"}`, nil, closeProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeClientMessage([]byte(tc.in))
			if tc.code != 0 {
				var fe *frameError
				require.True(t, errors.As(err, &fe), "%v", err)
				require.Equal(t, tc.code, fe.Code)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestUUIDForms(t *testing.T) {
	t.Parallel()
	const canon = "0c9c7b42-4d5e-4f1c-9d2a-1f3e5a7b9c0d"
	for _, tc := range []struct {
		in        string
		canonical string // "" when invalid
		strict    bool   // accepted by register
	}{
		{canon, canon, true},
		{"0C9C7B42-4D5E-4F1C-9D2A-1F3E5A7B9C0D", canon, false},
		{"0c9c7b424d5e4f1c9d2a1f3e5a7b9c0d", canon, false},
		{"0c9c7b42-4d5e-4f1c-9d2a-1f3e5a7b9c0", "", false},
		{"0c9c7b42-4d5e-4f1c-9d2a_1f3e5a7b9c0d", "", false},
		{"0c9c7b42-4d5e-4f1c-9d2a-1f3e5a7b9cgd", "", false},
		{"{0c9c7b42-4d5e-4f1c-9d2a-1f3e5a7b9c0d}", "", false},
		{"", "", false},
	} {
		got, ok := canonicalUUID(tc.in)
		require.Equal(t, tc.canonical != "", ok, tc.in)
		require.Equal(t, tc.canonical, got, tc.in)
		require.Equal(t, tc.strict, isCanonicalUUID(tc.in), tc.in)
	}
	u, ok := normalizeUAID("0C9C7B42-4D5E-4F1C-9D2A-1F3E5A7B9C0D")
	require.True(t, ok)
	require.Equal(t, "0c9c7b424d5e4f1c9d2a1f3e5a7b9c0d", u)
	require.True(t, hex32(newUAID()))
}

func TestDecodeAppServerKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []byte
	}{
		{"-_8=", []byte{0xfb, 0xff}},
		{"-_8", []byte{0xfb, 0xff}},
		{"+/8=", []byte{0xfb, 0xff}},
		{"+/8", []byte{0xfb, 0xff}},
		{"", nil},
		{"===", nil},
		{"a", nil},
		{"ab!c", nil},
	} {
		got, ok := decodeAppServerKey(tc.in)
		require.Equal(t, tc.want != nil, ok, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestServerFrames(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"messageType":"hello","uaid":"u","status":200,"use_webpush":true,"broadcasts":{}}`, string(encodeHello("u", nil)))
	require.Equal(t, `{"messageType":"register","channelID":"c","status":200,"pushEndpoint":"e"}`, string(encodeRegister("c", 200, "e")))
	require.Equal(t, `{"messageType":"unregister","channelID":"c","status":500}`, string(encodeUnregister("c", 500)))
	require.Equal(t, `{"messageType":"broadcast","broadcasts":{"a":"\"1\""}}`, string(encodeBroadcast(map[string]any{"a": `"1"`})))
	m := &store.PushMessage{ChannelID: "c", Data: []byte{0xfb, 0xff, 0x00}, Headers: map[string]string{"encoding": "aesgcm", "encryption": "salt=x", "crypto_key": "dh=y"}}
	require.Equal(t, `{"messageType":"notification","channelID":"c","version":"v","data":"-_8A","headers":{"crypto_key":"dh=y","encoding":"aesgcm","encryption":"salt=x"}}`,
		string(encodeNotification(m, "v")))
	// Without a body: neither data nor headers.
	m = &store.PushMessage{ChannelID: "c", Headers: map[string]string{"encoding": "aes128gcm"}}
	require.Equal(t, `{"messageType":"notification","channelID":"c","version":"v"}`, string(encodeNotification(m, "v")))
}

// FuzzDecodeClientMessage: any input decodes to a known message type or is
// refused with a close code the session can send; nothing panics.
func FuzzDecodeClientMessage(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"messageType":"ping"}`, `{"messageType":"hello","uaid":"x","broadcasts":{"a":"1"}}`,
		`{"messageType":"register","channelID":"0c9c7b42-4d5e-4f1c-9d2a-1f3e5a7b9c0d","key":"BAAA="}`,
		`{"messageType":"unregister","channelID":"0c9c7b42-4d5e-4f1c-9d2a-1f3e5a7b9c0d","code":200}`,
		`{"messageType":"ack","updates":[{"channelID":"0c9c7b42-4d5e-4f1c-9d2a-1f3e5a7b9c0d","version":"v","code":100}]}`,
		`{"messageType":"nack","version":"v","code":301}`, `{"messageType":"broadcast_subscribe","broadcasts":{}}`,
		`{"messageType":"x"}`, `{"messageType":null}`, `[`, `"{}"`,
		` {"updates" : [ {"code":-0,"version":"a b","channelID":"0C9C7B424D5E4F1C9D2A1F3E5A7B9C0D"} , {} ] , "messageType":"ack"} `,
		`{"messageType":"ack","updates":[]}`, `{"messageType":"ack","updates":[{"code":1e2}]}`, `{"messageType":"ack","updates":[{"code":01}]}`,
		`{"messageType":"ack","updates":[{"channelID":"x","channelID":"y"}]}`, `{"messageType":"ack","messageType":"ack","updates":[]}`,
		`{"messageType":"ack","updates":[{"version":null}]}`, `{"messageType":"ack","updates":null}`, `{"messageType":"ack"}`,
		`{"messageType":"ack","updates":[{"channelID":"bad"}]}`, `{"messageType":"ack","updates":[{"code":123456789012345678901}]}`, "{\"messageType\":\"hello\",\"uaid\":\"\\ud800\"}",
	} {
		f.Add([]byte(s))
	}
	known := map[string]bool{msgHello: true, msgRegister: true, msgUnregister: true, msgAck: true, msgNack: true, msgPing: true, msgBroadcastSubscribe: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeClientMessage(data)
		if _, fast := decodeAckFast(data); fast && !isEmptyObject(data) {
			// The fast path answers exactly what encoding/json would.
			slow, serr := decodeClientMessageJSON(data)
			if (err == nil) != (serr == nil) || (err == nil && !reflect.DeepEqual(m, slow)) {
				t.Fatalf("fast ack %+v, %v; encoding/json %+v, %v", m, err, slow, serr)
			}
			if err != nil && err.Error() != serr.Error() {
				t.Fatalf("fast ack error %q, encoding/json %q", err, serr)
			}
		}
		if err != nil {
			var fe *frameError
			if !errors.As(err, &fe) || (fe.Code != closeProtocol && fe.Code != closeUnsupported) {
				t.Fatalf("error %v is not a frame error with a protocol close code", err)
			}
			if m != nil {
				t.Fatal("message with an error")
			}
			return
		}
		if !known[m.Type] {
			t.Fatalf("unknown type %q accepted", m.Type)
		}
		if m.Type != msgPing && !json.Valid(data) {
			t.Fatalf("invalid JSON accepted: %q", data)
		}
		for _, u := range m.Updates {
			if !isCanonicalUUID(u.ChannelID) {
				t.Fatalf("ack channelID %q not canonical", u.ChannelID)
			}
		}
		if m.Type == msgUnregister && !isCanonicalUUID(m.ChannelID) {
			t.Fatalf("unregister channelID %q not canonical", m.ChannelID)
		}
	})
}

// The hand-written notification frame is json.Marshal's, byte for byte,
// whatever the headers hold.
func TestEncodeNotificationAsMarshal(t *testing.T) {
	values := []string{"", "aes128gcm", `keyid="p256dh";dh=BNoR`, "a\"b\\c", "<&>", "é ü", "\x00\x1f\x7f", "\xff\xfe", "\u2028"}
	for i := range 200 {
		m := &store.PushMessage{ChannelID: testChid}
		if i%5 != 0 {
			m.Data = make([]byte, i*7%300+1)
			for j := range m.Data {
				m.Data[j] = byte(i*31 + j)
			}
			m.Headers = map[string]string{}
			for j := range i % 4 {
				m.Headers[[]string{"encoding", "crypto_key", "encryption", "x<y"}[j]] = values[(i+j)%len(values)]
			}
		}
		version := "gAAAAAB" + strings.Repeat("x", i%40) + values[i%len(values)]
		f := notificationFrame{MessageType: msgNotification, ChannelID: m.ChannelID, Version: version}
		if len(m.Data) > 0 {
			f.Data = base64.RawURLEncoding.EncodeToString(m.Data)
			f.Headers = m.Headers
		}
		want := mustJSON(&f)
		if got := encodeNotification(m, version); string(got) != string(want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func BenchmarkDecodeAck(b *testing.B) {
	data := []byte(`{"messageType":"ack","updates":[{"channelID":"0c9c7b42-4d5e-4f1c-9d2a-1f3e5a7b9c0d","version":"gAAAAABnAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","code":100}]}`)
	for _, c := range []struct {
		name string
		fn   func([]byte) (*clientMessage, error)
	}{{"fast", decodeClientMessage}, {"json", decodeClientMessageJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.fn(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
