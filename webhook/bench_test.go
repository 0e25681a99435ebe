package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkSend measures one signed 1 KiB delivery to a loopback server,
// connections pooled, from parallel goroutines, on the direct HTTP/1.1
// path (ADR 0017) and through net/http's Transport. Allocations include
// the test server's.
func BenchmarkSend(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, path := range []string{"direct", "transport"} {
		b.Run(path, func(b *testing.B) {
			s := NewSender(Config{Guard: &Guard{AllowLoopback: true}, StdTransport: path == "transport"})
			defer s.Close()

			body := bytes.Repeat([]byte("x"), 1024)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req := testRequest(srv.URL + "/hook")
				req.Body = body
				for pb.Next() {
					if res := s.Send(context.Background(), req); !res.Success {
						b.Errorf("send failed: %s %s", res.Class, res.Message)
						return
					}
				}
			})
		})
	}
}

// BenchmarkSign measures the webhook-signature of a 1 KiB body.
func BenchmarkSign(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	ts := time.Unix(vectorTimestamp, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Sign(vectorSecret, vectorMsgID, ts, body); err != nil {
			b.Fatal(err)
		}
	}
}
