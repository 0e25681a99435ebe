package push

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/sqlite"
)

// The session benchmarks guard the connection side's hot paths across
// refactors of conn: a direct delivery acked by the user agent, a register
// and unregister round trip, and the endpoint's route lookup in a
// session's channel cache. They use a real socket and a SQLite store, as
// the tests do (setup takes a *testing.T, so they have their own).

// benchSession is one user agent in session on a fresh hub.
type benchSession struct {
	h    *hub
	ws   *websocket.Conn
	uaid string
	chid string
}

func newBenchSession(b *testing.B) *benchSession {
	b.Helper()
	keys, err := ParseKeys(GenerateKey())
	if err != nil {
		b.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "herald.db"), Synchronous: "normal"})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	s := &Server{cfg: Config{
		Store: st, Keys: keys, EndpointURL: "https://push.example.test", NodeID: testNode,
		AckWait: 10 * time.Second, HandshakeTimeout: 5 * time.Second,
	}}
	s.hub = newHub(s)
	srv := httptest.NewServer(s.hub)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = ws.Close()
		s.hub.Close()
		srv.Close()
		_ = st.Close()
	})
	bs := &benchSession{h: s.hub, ws: ws, chid: "00000001-0000-4000-8000-000000000001"}
	bs.send(b, map[string]any{"messageType": "hello", "use_webpush": true})
	bs.uaid = bs.read(b)["uaid"].(string)
	bs.send(b, map[string]any{"messageType": "register", "channelID": bs.chid})
	if r := bs.read(b); r["status"] != 200.0 {
		b.Fatalf("register: %v", r)
	}
	return bs
}

func (bs *benchSession) send(b *testing.B, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	if err := bs.ws.WriteMessage(websocket.TextMessage, raw); err != nil {
		b.Fatal(err)
	}
}

func (bs *benchSession) read(b *testing.B) map[string]any {
	_ = bs.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, raw, err := bs.ws.ReadMessage()
	if err != nil {
		b.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkSessionDeliverAck: Deliver writes a notification, the user
// agent acks it, Deliver returns Delivered (no store call).
func BenchmarkSessionDeliverAck(b *testing.B) {
	bs := newBenchSession(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m := &store.PushMessage{
			ID: herald.NewID(herald.PrefixPushMessage), UAID: bs.uaid, ChannelID: bs.chid, TTL: 60,
			Data: []byte("bench"), Headers: map[string]string{"encoding": "aes128gcm"},
		}
		done := make(chan DeliverOutcome, 1)
		go func() {
			out, _ := bs.h.Deliver(context.Background(), m, "")
			done <- out
		}()
		n := bs.read(b)
		bs.send(b, map[string]any{"messageType": "ack", "updates": []map[string]any{{"channelID": n["channelID"], "version": n["version"], "code": 100}}})
		if out := <-done; out != Delivered {
			b.Fatalf("outcome %v", out)
		}
	}
}

// BenchmarkSessionRegisterUnregister: one register and one unregister of
// a second channel, each answered (two store writes).
func BenchmarkSessionRegisterUnregister(b *testing.B) {
	bs := newBenchSession(b)
	chid := "00000002-0000-4000-8000-000000000002"
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		bs.send(b, map[string]any{"messageType": "register", "channelID": chid})
		if r := bs.read(b); r["status"] != 200.0 {
			b.Fatalf("register: %v", r)
		}
		bs.send(b, map[string]any{"messageType": "unregister", "channelID": chid})
		if r := bs.read(b); r["status"] != 200.0 {
			b.Fatalf("unregister: %v", r)
		}
	}
}

// BenchmarkKnownRoute: the endpoint's lookup of a channel in the cache of
// a session here, from parallel senders.
func BenchmarkKnownRoute(b *testing.B) {
	bs := newBenchSession(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !bs.h.knownRoute(bs.uaid, bs.chid).known {
				b.Error("route not known")
				return
			}
		}
	})
}
