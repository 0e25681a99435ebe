package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/webhook"
)

// rawHeads is a plain TCP receiver that keeps the request head of every
// request exactly as it arrived on the wire, keyed by herald's webhook-id.
type rawHeads struct {
	url  string
	mu   sync.Mutex
	head map[string]string
}

func newRawHeads(t *testing.T) *rawHeads {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	r := &rawHeads{url: "http://" + ln.Addr().String() + "/hook", head: map[string]string{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	return r
}

func (r *rawHeads) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	var head strings.Builder
	id := ""
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		head.WriteString(line)
		if name, value, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":"); ok && strings.EqualFold(name, webhook.HeaderID) {
			id = strings.TrimSpace(value)
		}
		if line == "\r\n" {
			break
		}
	}
	r.mu.Lock()
	r.head[id] = head.String()
	r.mu.Unlock()
	_, _ = c.Write([]byte("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"))
}

// sentOnWire reports whether the head holds the line "name: value" (name in
// any case).
func sentOnWire(head, name, value string) bool {
	for _, line := range strings.Split(head, "\r\n") {
		n, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(n, name) && strings.TrimSpace(v) == value {
			return true
		}
	}
	return false
}

// The API refuses exactly the extra headers the sender would not send: for
// each name, a subscription header is either refused at the door or
// arrives at the receiver as given — never accepted and then silently
// dropped.
func TestReservedHeadersAPIAgreesWithSender(t *testing.T) {
	t.Parallel()
	recv := newRawHeads(t)
	sender := webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}})
	t.Cleanup(sender.Close)

	tests := []struct {
		name    string
		refused bool
	}{
		{"Content-Type", true},
		{"content-length", true},
		{"Host", true},
		{"Transfer-Encoding", true},
		{"Connection", true},
		{"Keep-Alive", true},
		{"TE", true},
		{"Trailer", true},
		{"Upgrade", true},
		{"Expect", true},
		{"Proxy-Authorization", true},
		{"Proxy-Connection", true},
		{"proxy-anything", true},
		{"Webhook-Id", true},
		{"webhook-anything", true},
		{"Herald-Attempt", true},
		{"Authorization", false},
		{"User-Agent", false},
		{"X-Tenant", false},
		{"X-Webhook-Id", false},
		{"Accept", false},
		{"Cookie", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			value := fmt.Sprintf("sub-value-%d", i)
			apiErr := validHeader(tt.name, value)
			require.Equal(t, tt.refused, apiErr != nil, "API: %v", apiErr)

			msgID := fmt.Sprintf("msg_reserved_%d", i)
			res := sender.Send(context.Background(), &webhook.Request{
				URL: recv.url, Method: http.MethodPost, Headers: map[string]string{tt.name: value},
				Body: []byte(`{}`), MsgID: msgID, Secrets: []string{webhook.NewSecret()},
			})
			require.True(t, res.Success, "%+v", res)
			recv.mu.Lock()
			head := recv.head[msgID]
			recv.mu.Unlock()
			require.NotEmpty(t, head)
			require.Equal(t, !tt.refused, sentOnWire(head, tt.name, value),
				"the API accepts %s iff the sender sends it; head:\n%s", tt.name, head)
		})
	}
}
