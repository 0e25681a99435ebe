package push

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// DeliverOutcome says what became of a message handed to this node.
type DeliverOutcome int

const (
	// NotConnected: the user agent has no session on this node (or its
	// queue is full); the caller stores the message.
	NotConnected DeliverOutcome = iota
	// Delivered: the user agent acked it (or it had TTL 0 and was written).
	Delivered
	// Stored: it was written to the user agent but not acked within
	// AckWait, so the hub stored it; the user agent's ack deletes it.
	Stored
	// QueueFull: the user agent is in session here but ClientChannelCapacity
	// messages already await its ack. Nothing is stored (a message stored
	// now would be read back and counted toward MsgLimit); the sender is
	// answered 429 with Retry-After.
	QueueFull
)

func (o DeliverOutcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Stored:
		return "stored"
	case QueueFull:
		return "queue_full"
	default:
		return "not_connected"
	}
}

// Connection-side limits.
const (
	// maxFrameBytes is the largest client frame read (8 KiB); a larger
	// one closes the session with 1009. Client frames are small JSON: an
	// ack of a full batch is about 2 KB, a hello with broadcasts at the
	// usual one or two ids well under 1 KB.
	maxFrameBytes = 8 << 10
	// readBufferSize is the size of the pooled buffers a readable socket
	// is read into (readBufferPool): client frames are small (a hello, an
	// ack of a full batch about 2 KB); a larger one is read in several
	// fills, its start kept by the frame reader. A session holds none
	// between reads, and the pool holds about one per running worker.
	readBufferSize = 4 << 10
	// upgradeBufferSize is the read buffer gorilla's upgrader gives the
	// Conn it returns, which is dropped at once (ADR 0027).
	upgradeBufferSize = 512
	// writeWait bounds every write to a user agent.
	writeWait = 10 * time.Second
	// controlWriteWait bounds the answer to the user agent's ping or close
	// (gorilla's bound, kept).
	controlWriteWait = time.Second
	// closeGrace is how long a closing session waits for the user agent's
	// close frame before dropping the TCP connection.
	closeGrace = time.Second
	// storeTimeout bounds each store call of the connection side.
	storeTimeout = 10 * time.Second
	// defaultMinPingInterval: a second protocol ping sooner than this
	// closes the session (autopush's 45 s).
	defaultMinPingInterval = 45 * time.Second
	// closeDrainBytes bounds what is read and discarded from a user agent
	// after the session closed (a frame over the read limit is still
	// arriving): reading it lets the close frame reach the peer instead of
	// being lost to a TCP reset.
	closeDrainBytes = 1 << 20
)

// writeBufferPool stays empty: it only keeps gorilla's upgrader from
// allocating a write buffer for a Conn that is dropped.
var writeBufferPool = &sync.Pool{}

// hub is the connection side of one node: the user agents connected here.
type hub struct {
	s        *Server
	store    store.PushStore
	keys     *Keys
	nodeID   string
	endpoint string // EndpointURL without a trailing slash
	obs      Observer
	log      *slog.Logger
	now      func() time.Time

	msgLimit         int
	ackWait          time.Duration
	pingInterval     time.Duration
	pingTimeout      time.Duration
	handshakeTimeout time.Duration
	broadcastPoll    time.Duration
	// minPingInterval is the least time between two protocol pings of a
	// user agent (45 s); a field so tests can shorten it.
	minPingInterval time.Duration
	// routerRefresh is how often a session re-asserts its router record
	// (defaultRouterRefresh).
	routerRefresh time.Duration
	// afterHelloWrite, when set (tests only), runs in the session's
	// goroutine once hello is answered: the moment the user agent may act.
	afterHelloWrite func(uaid string)

	// maxChannels and registerLimit apply Limits to registers.
	maxChannels   int
	registerLimit *registerLimit

	upgrader websocket.Upgrader

	mu     sync.RWMutex
	conns  map[string]*conn // by uaid: sessions past hello
	all    map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup // sessions and their storage checks

	// connects, lists and deletes gather the sessions' router writes,
	// storage reads and ack deletions into one statement each (gather.go).
	connects *gather[*store.PushUserConnectParams, store.PushUserConnectResult]
	lists    *gather[string, []*store.PushMessage]
	deletes  *gather[*store.PushMessageDeleteParams, int]

	bc       broadcastRegistry
	bcReady  chan struct{} // closed after the first broadcast load
	stop     chan struct{}
	pollDone chan struct{}
}

// newHub makes the connection side of s from s.cfg (zero durations and
// limits mean the defaults) and starts its broadcast poller: s.cfg must be
// set first, and Close must be called to stop it.
func newHub(s *Server) *hub {
	cfg := &s.cfg
	h := &hub{
		s:                s,
		store:            cfg.Store,
		keys:             cfg.Keys,
		nodeID:           cfg.NodeID,
		endpoint:         strings.TrimRight(cfg.EndpointURL, "/"),
		obs:              cfg.Observer,
		log:              cfg.Logger,
		now:              cfg.Now,
		msgLimit:         cfg.MsgLimit,
		ackWait:          orDuration(cfg.AckWait, DefaultAckWait),
		pingInterval:     orDuration(cfg.PingInterval, DefaultPingInterval),
		pingTimeout:      orDuration(cfg.PingTimeout, DefaultPingTimeout),
		handshakeTimeout: orDuration(cfg.HandshakeTimeout, DefaultHandshakeTimeout),
		broadcastPoll:    orDuration(cfg.BroadcastPoll, DefaultBroadcastPoll),
		minPingInterval:  defaultMinPingInterval,
		routerRefresh:    defaultRouterRefresh,
		maxChannels:      cfg.Limits.MaxChannels,
		registerLimit:    newRegisterLimit(cfg.Limits),
		conns:            map[string]*conn{},
		all:              map[*conn]struct{}{},
		bcReady:          make(chan struct{}),
		stop:             make(chan struct{}),
		pollDone:         make(chan struct{}),
	}
	if h.obs == nil {
		h.obs = nopObserver{}
	}
	if h.log == nil {
		h.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.msgLimit <= 0 {
		h.msgLimit = DefaultMsgLimit
	}
	h.connects = &gather[*store.PushUserConnectParams, store.PushUserConnectResult]{
		key: func(p *store.PushUserConnectParams) string { return p.UAID },
		run: func(ctx context.Context, items []*store.PushUserConnectParams) ([]store.PushUserConnectResult, error) {
			return h.store.PushUserConnectMany(ctx, &store.PushUserConnectManyParams{Connects: items})
		},
	}
	h.lists = &gather[string, []*store.PushMessage]{
		key: func(uaid string) string { return uaid },
		run: func(ctx context.Context, uaids []string) ([][]*store.PushMessage, error) {
			m, err := h.store.PushMessageListMany(ctx, &store.PushMessageListManyParams{UAIDs: uaids, Now: h.now(), Limit: BatchSize})
			if err != nil {
				return nil, err
			}
			out := make([][]*store.PushMessage, len(uaids))
			for i, uaid := range uaids {
				out[i] = m[uaid]
			}
			return out, nil
		},
	}
	h.deletes = &gather[*store.PushMessageDeleteParams, int]{
		run: func(ctx context.Context, items []*store.PushMessageDeleteParams) ([]int, error) {
			return h.store.PushMessageDeleteMany(ctx, &store.PushMessageDeleteManyParams{Deletes: items})
		},
	}
	h.upgrader = websocket.Upgrader{
		HandshakeTimeout: h.handshakeTimeout,
		ReadBufferSize:   upgradeBufferSize,
		// The Conn's writer is never used: frames are written by
		// writeFrame. A pool keeps it from allocating a buffer.
		WriteBufferPool: writeBufferPool,
		// Firefox asks for push-notification; other clients ask for
		// nothing and are served too.
		Subprotocols: []string{"push-notification"},
		// User agents connect from any page's origin (autopush checks
		// none); the socket carries no ambient credentials.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		if err := h.loadBroadcasts(ctx); err != nil {
			h.log.Warn("push: loading broadcasts", "err", err)
		}
		cancel()
		close(h.bcReady)
		h.pollBroadcasts()
	}()
	return h
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Deliver hands m to the user agent m.UAID if it is connected here and
// returns once the outcome is final (see DeliverOutcome): a 201 may be sent
// for Delivered and Stored. version is m's message id (Keys.MessageID);
// when "", it is made here, and m.ID set first when empty. A TTL 0
// message is written and not tracked. Any other waits up to AckWait for
// the user agent's ack; without one it is stored (Stored), and the ack
// that comes later deletes it. If ctx ends first, ctx's error is
// returned and the message stays the session's: it is stored when the
// socket closes unacked.
func (h *hub) Deliver(ctx context.Context, m *store.PushMessage, version string) (DeliverOutcome, error) {
	c := h.lookup(m.UAID)
	if c == nil {
		return NotConnected, nil
	}
	if version == "" {
		if m.ID == "" {
			m.ID = herald.NewID(herald.PrefixPushMessage)
		}
		var err error
		version, err = h.keys.MessageID(&MessageRef{UAID: m.UAID, ChannelID: m.ChannelID, ID: m.ID, Topic: m.Topic})
		if err != nil {
			return NotConnected, err
		}
	}
	return c.deliver(ctx, m, version)
}

// routeHint is what knownRoute found: a session here, and whether it
// knows the channel registered.
type routeHint struct {
	c       *conn
	gen     uint64
	keyHash []byte
	known   bool
}

// knownRoute reports whether uaid is in session here with channel chid
// known registered (then the endpoint routes without reading the store).
func (h *hub) knownRoute(uaid, chid string) routeHint {
	c := h.lookup(uaid)
	if c == nil {
		return routeHint{}
	}
	kh, ok, gen := c.knownChannel(chid)
	return routeHint{c: c, gen: gen, keyHash: kh, known: ok}
}

// learnRoute tells the session of hint that chid is registered with
// keyHash, read from the store after hint was taken; a register or
// unregister of the session since then makes it ignore the read.
func (h *hub) learnRoute(hint routeHint, chid string, keyHash []byte) {
	if hint.c != nil && h.lookup(hint.c.uaid) == hint.c {
		hint.c.learnChannel(hint.gen, chid, keyHash)
	}
}

// Notify asks the session of uaid, if connected here, to check storage;
// it reports whether uaid is connected here.
func (h *hub) Notify(uaid string) bool {
	c := h.lookup(uaid)
	if c == nil {
		return false
	}
	return c.notify()
}

// ServeHTTP upgrades a request to a push WebSocket session, starts it and
// returns.
func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	// Read before the 101 is written: the user agent may act on the
	// answer (and the clock move) before Upgrade returns here.
	upgradedAt := h.now().UnixMilli()
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		h.wg.Done()
		return // the upgrader answered the request
	}
	// From here the socket is the session's: gorilla's Conn, with its
	// buffers, is dropped (the upgrader refuses a client that sent bytes
	// before the handshake was answered, so none are buffered in it). The
	// handler returns and net/http's per-request state goes with it; the
	// session has no goroutine (ADR 0027).
	// The first check runs once hello is answered (handshake); a nudge
	// meanwhile only marks it.
	//
	// connectedAt starts as the upgrade's time, not hello's: a hello the
	// user agent gave up on (it waited past its own timeout on a busy node
	// and reconnected elsewhere) may be read long after, and must not take
	// the router record from the session that replaced it (see hello).
	// tIdx is set before track: from there Close may close the session
	// (and arm its timers) before start runs.
	c := &conn{h: h, nc: ws.NetConn(), addr: clientKey(r), check: checkRunning, connectedAt: upgradedAt, tIdx: -1}
	if !h.track(c) {
		_ = writeFrame(c.nc, opClose, closePayload(closeGoingAway, "shutting down"), time.Now().Add(closeGrace))
		_ = c.nc.Close()
		h.wg.Done()
		return
	}
	c.start()
}

// Connected counts the user agents in session on this node.
func (h *hub) Connected() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.conns)
}

// Close ends every session (unacked direct messages are stored) and waits.
func (h *hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.wg.Wait()
		return
	}
	h.closed = true
	all := make([]*conn, 0, len(h.all))
	for c := range h.all {
		all = append(all, c)
	}
	h.mu.Unlock()
	close(h.stop)
	for _, c := range all {
		c.closeWith(closeGoingAway, "shutting down")
	}
	h.wg.Wait()
	<-h.pollDone
}

func (h *hub) lookup(uaid string) *conn {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.conns[uaid]
}

// track records a new socket so Close can end it; false once closed.
func (h *hub) track(c *conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.all[c] = struct{}{}
	return true
}

func (h *hub) untrack(c *conn) {
	h.mu.Lock()
	delete(h.all, c)
	h.mu.Unlock()
}

// register makes c the session of its uaid on this node and returns the
// older session of the uaid here, if any: the caller ghosts it (ghost)
// once the router record names c, or puts it back (restore) when the
// connect is refused, so a refused hello ends no live session.
func (h *hub) register(c *conn) *conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.registerLocked(c)
}

func (h *hub) registerLocked(c *conn) *conn {
	old := h.conns[c.uaid]
	if old != nil && old.connectedAt >= c.connectedAt {
		// connected_at tells the two sessions apart in the router record:
		// the older one's disconnect must not clear the newer one's.
		c.connectedAt = old.connectedAt + 1
	}
	h.conns[c.uaid] = c
	if old == c {
		return nil
	}
	return old
}

// registerNewer is register for a returning uaid's new session, unless a
// session of the uaid here was upgraded after c: then c is the stale one
// (its hello was read late) and nothing changes (ok false).
func (h *hub) registerNewer(c *conn) (old *conn, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if o := h.conns[c.uaid]; o != nil && o != c && o.connectedAt > c.connectedAt {
		return nil, false
	}
	return h.registerLocked(c), true
}

// ghost closes old, a session of a uaid that reconnected here, as autopush
// does: the user agent evidently reconnected. Safe on nil.
func (h *hub) ghost(old *conn) {
	if old != nil {
		old.closeWith(closeError, "ghost: a newer session of this uaid connected")
	}
}

// restore undoes register(c) that returned old.
func (h *hub) restore(c, old *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns[c.uaid] != c {
		return
	}
	if old != nil && !old.isClosed() {
		// Lock order h.mu then c.mu: no path takes them the other way.
		// A teardown of old that starts after this check unregisters it.
		h.conns[c.uaid] = old
	} else {
		delete(h.conns, c.uaid)
	}
}

// unregister removes c as its uaid's session (if it still is).
func (h *hub) unregister(c *conn) {
	h.mu.Lock()
	if h.conns[c.uaid] == c {
		delete(h.conns, c.uaid)
	}
	h.mu.Unlock()
}

// storeCtx bounds one store call of the connection side. Session work is
// not tied to a request, and what a closing session writes (unacked direct
// messages) must not be cut short by the close.
func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}
