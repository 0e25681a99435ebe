package bench

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// A push client process holds user agents for the cluster scenario
// (push_cluster.go): one process holds at most one open-file limit's worth
// of sockets, so `herald bench push --nodes N` re-executes itself as
// `herald bench push-client` children and drives them over their stdin and
// stdout, one line each way per event:
//
//	parent → child (JSON): {"op":"connect",…}, {"op":"targets",…}, {"op":"quit"}
//	child → parent (text): "ep <i> <uaid> <endpoint path>" per registered user agent,
//	                       "up <connected> <failed>" when a connect is done,
//	                       "r <seq> <latency ns>" per notification (acked at once),
//	                       "down <i>", "re <i>" when a user agent lost its socket and
//	                       reconnected (hello with its uaid), "fail <kind>" per failed
//	                       reconnect attempt, "lostuaid <i>" when the node answered
//	                       the hello with another uaid.
//
// Sender and user agent share the machine's clock, so the latency is the
// receive time minus the send time the sender wrote into the body.

// pushClientCmd is one command from the parent.
type pushClientCmd struct {
	Op string `json:"op"`
	// connect: Count user agents to Addr from Sources (round robin), each
	// registering one channel.
	Addr    string   `json:"addr,omitempty"`
	Count   int      `json:"count,omitempty"`
	Sources []string `json:"sources,omitempty"`
	// targets: the nodes a user agent whose socket dropped reconnects to,
	// after a random wait of up to JitterMs (the storm's spread); while
	// attempts fail it backs off as Firefox does (dom.push.retryBaseInterval:
	// 5 s, doubling), capped at 60 s, each wait ±50% at random so the
	// retries do not come back in step.
	Targets  []string `json:"targets,omitempty"`
	JitterMs int      `json:"jitter_ms,omitempty"`
}

// pushClient is the state of one client process.
type pushClient struct {
	out       *bufio.Writer
	outMu     sync.Mutex
	targets   atomic.Pointer[[]string]
	jitter    atomic.Int64 // ns
	dialers   []*websocket.Dialer
	redialers []*websocket.Dialer
	closing   atomic.Bool
	// failures counts failed reconnect attempts; the first few are
	// written to stderr.
	failures atomic.Int64
	// full: target address → unix ns until which it is skipped (it
	// answered 503: at its session cap).
	full  sync.Map
	mu    sync.Mutex
	conns map[int]*websocket.Conn
	wg    sync.WaitGroup
}

func (c *pushClient) emit(format string, args ...any) {
	c.outMu.Lock()
	fmt.Fprintf(c.out, format+"\n", args...)
	c.outMu.Unlock()
}

func (c *pushClient) flush() {
	c.outMu.Lock()
	_ = c.out.Flush()
	c.outMu.Unlock()
}

// RunPushClient is `herald bench push-client`: it reads commands from in
// and writes events to out until "quit" or in ends.
func RunPushClient(ctx context.Context, in io.Reader, out io.Writer) error {
	c := &pushClient{out: bufio.NewWriterSize(out, 64<<10), conns: map[int]*websocket.Conn{}}
	c.targets.Store(&[]string{})
	c.jitter.Store(int64(5 * time.Second))
	// Events are flushed every 5 ms: the parent only counts them (the
	// latency is taken here, on receipt).
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	go func() {
		for range tick.C {
			c.flush()
		}
	}()
	defer c.shutdown()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	next := 0
	for sc.Scan() {
		var cmd pushClientCmd
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			return fmt.Errorf("push-client: %w", err)
		}
		switch cmd.Op {
		case "connect":
			c.setSources(cmd.Sources)
			ok, failed := c.connect(ctx, cmd.Addr, next, cmd.Count)
			next += cmd.Count
			c.emit("up %d %d", ok, failed)
			c.flush()
		case "targets":
			t := cmd.Targets
			c.targets.Store(&t)
			if cmd.JitterMs > 0 {
				c.jitter.Store(int64(cmd.JitterMs) * int64(time.Millisecond))
			}
		case "quit":
			return nil
		default:
			return fmt.Errorf("push-client: unknown op %q", cmd.Op)
		}
	}
	return sc.Err()
}

func (c *pushClient) setSources(sources []string) {
	if len(sources) == 0 {
		sources = []string{""}
	}
	c.dialers, c.redialers = c.dialers[:0], c.redialers[:0]
	for _, s := range sources {
		nd := &net.Dialer{Timeout: 10 * time.Second, Control: bindNoPort}
		if s != "" {
			nd.LocalAddr = &net.TCPAddr{IP: net.ParseIP(s)}
		}
		c.dialers = append(c.dialers, &websocket.Dialer{NetDialContext: nd.DialContext, HandshakeTimeout: 30 * time.Second, ReadBufferSize: 256, WriteBufferSize: 256})
		// A reconnect gives a node 5 s, then asks the next (a load
		// balancer's connect timeout).
		rd := *nd
		rd.Timeout = 5 * time.Second
		c.redialers = append(c.redialers, &websocket.Dialer{NetDialContext: rd.DialContext, HandshakeTimeout: 5 * time.Second, ReadBufferSize: 256, WriteBufferSize: 256})
	}
}

// connect opens count user agents [first, first+count) to addr, 64 at a
// time, and starts each one's reader.
func (c *pushClient) connect(ctx context.Context, addr string, first, count int) (ok, failed int64) {
	var next atomic.Int64
	var nOK, nFailed atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := first + int(next.Add(1)) - 1
				if i >= first+count || ctx.Err() != nil {
					return
				}
				ua, err := dialBenchUA(ctx, addr, "", true, c.dialers[i%len(c.dialers)])
				if err != nil {
					nFailed.Add(1)
					continue
				}
				u, _ := url.Parse(ua.endpoint)
				c.emit("ep %d %s %s", i, ua.uaid, u.EscapedPath())
				nOK.Add(1)
				c.mu.Lock()
				c.conns[i] = ua.ws
				c.mu.Unlock()
				c.wg.Add(1)
				go c.serve(ctx, i, ua.uaid, ua.ws)
			}
		}()
	}
	wg.Wait()
	return nOK.Load(), nFailed.Load()
}

// serve reads user agent i's notifications and acks each; when its socket
// drops it reconnects with its uaid to one of the targets.
func (c *pushClient) serve(ctx context.Context, i int, uaid string, ws *websocket.Conn) {
	defer c.wg.Done()
	for {
		var n struct {
			MessageType string `json:"messageType"`
			ChannelID   string `json:"channelID"`
			Version     string `json:"version"`
			Data        string `json:"data"`
		}
		if err := ws.ReadJSON(&n); err != nil {
			_ = ws.Close()
			if c.closing.Load() || ctx.Err() != nil {
				return
			}
			c.emit("down %d", i)
			if ws = c.reconnect(ctx, i, uaid); ws == nil {
				return
			}
			continue
		}
		if n.MessageType != "notification" {
			continue
		}
		if b, err := base64.RawURLEncoding.DecodeString(n.Data); err == nil && len(b) >= 16 {
			sent := int64(binary.BigEndian.Uint64(b))
			c.emit("r %d %d", binary.BigEndian.Uint64(b[8:]), time.Now().UnixNano()-sent)
		}
		ack := fmt.Sprintf(`{"messageType":"ack","updates":[{"channelID":%q,"version":%q,"code":100}]}`, n.ChannelID, n.Version)
		_ = ws.WriteMessage(websocket.TextMessage, []byte(ack))
	}
}

func (c *pushClient) reconnect(ctx context.Context, i int, uaid string) *websocket.Conn {
	wait := time.Duration(rand.Int64N(max(c.jitter.Load(), 1)))
	backoff := 5 * time.Second
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if c.closing.Load() {
			return nil
		}
		// One attempt is each target once, in a random order, as a load
		// balancer tries its backends: a node at its session cap answers
		// 503 at once and the next one is asked; as a balancer with a
		// connection cap per backend would, the process then skips that
		// node for fullFor (unless every node is marked full).
		targets := *c.targets.Load()
		order := rand.Perm(len(targets))
		now := time.Now().UnixNano()
		open := order[:0:0]
		for _, t := range order {
			if until, ok := c.full.Load(targets[t]); !ok || until.(int64) < now {
				open = append(open, t)
			}
		}
		if len(open) == 0 {
			open = order
		}
		for _, t := range open {
			ua, err := dialBenchUA(ctx, targets[t], uaid, false, c.redialers[i%len(c.redialers)])
			if err != nil {
				kind := failKind(err)
				if kind == "rejected" {
					c.full.Store(targets[t], time.Now().Add(fullFor).UnixNano())
				}
				c.emit("fail %s", kind)
				if c.failures.Add(1) <= 3 {
					fmt.Fprintf(os.Stderr, "bench push-client: reconnect to %s: %v\n", targets[t], err)
				}
				continue
			}
			if ua.uaid != uaid {
				c.emit("lostuaid %d", i)
			}
			c.mu.Lock()
			c.conns[i] = ua.ws
			c.mu.Unlock()
			c.emit("re %d", i)
			return ua.ws
		}
		wait = backoff/2 + time.Duration(rand.Int64N(int64(backoff)))
		backoff = min(2*backoff, time.Minute)
	}
}

// fullFor is how long a client process skips a node that answered a
// reconnect 503.
const fullFor = 10 * time.Second

// failKind names why a reconnect attempt failed, for the report.
func failKind(err error) string {
	var ne net.Error
	var ce *websocket.CloseError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.As(err, &ce):
		// The node closed the session at hello (1011: already connected
		// elsewhere, or a store error; 1013: try again later).
		return "closed_" + strconv.Itoa(ce.Code)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.Is(err, websocket.ErrBadHandshake):
		return "rejected" // a node at its session cap answers 503
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "other"
	}
}

func (c *pushClient) shutdown() {
	c.closing.Store(true)
	c.mu.Lock()
	for _, ws := range c.conns {
		_ = ws.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
	c.flush()
}
