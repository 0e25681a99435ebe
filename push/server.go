package push

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/heraldhq/herald/store"
)

// Defaults.
const (
	DefaultMsgLimit         = 150
	DefaultAckWait          = time.Second
	DefaultPingInterval     = 300 * time.Second
	DefaultPingTimeout      = 4 * time.Second
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultBroadcastPoll    = 30 * time.Second
	DefaultIdleExpiry       = 60 * 24 * time.Hour
	// BatchSize is how many stored messages are sent before waiting for
	// all of them to be acked.
	BatchSize = 10
	// ClientChannelCapacity bounds the messages waiting to be written to
	// one user agent (autopush-rs: 128); beyond it a hand-off answers "not
	// here" and the message is stored.
	ClientChannelCapacity = 128
)

// Config configures the push service of one node.
type Config struct {
	Store store.PushStore
	Keys  *Keys
	// EndpointURL is the public base URL endpoints are built on
	// (scheme://host[:port], no trailing slash). VAPID's aud must equal
	// its origin.
	EndpointURL string
	// NodeID is this node's internal URL (http://host:port of
	// --internal-listen): what the router record stores and what other
	// nodes call. On a single node it may be any unique string.
	NodeID string
	// MsgLimit: more stored messages than this read in one session reset
	// the uaid (default DefaultMsgLimit).
	MsgLimit int
	// AckWait is how long a direct delivery waits for the user agent's ack
	// before storing the message (and then answering the sender).
	AckWait          time.Duration
	PingInterval     time.Duration
	PingTimeout      time.Duration
	HandshakeTimeout time.Duration
	BroadcastPoll    time.Duration
	// HTTPClient calls other nodes' internal listeners.
	HTTPClient *http.Client
	Observer   Observer
	Logger     *slog.Logger
	Now        func() time.Time
}

// Server is the push service of one node.
type Server struct {
	cfg Config
	hub *hub
}
