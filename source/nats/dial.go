package natssrc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/source"
)

// Connection and consumer settings.
const (
	// defaultDialTimeout bounds the TCP connect and NATS handshake when
	// the dial context has no deadline.
	defaultDialTimeout = 5 * time.Second
	// reconnectWait and maxReconnects: a dialled connection tries to
	// reconnect this often, this many times (about 10 s in all), riding
	// out a broker restart; then it closes and Receive fails.
	reconnectWait = 500 * time.Millisecond
	maxReconnects = 20
	// ackWait is the durable's AckWait: how long the server waits for
	// the ack of a delivered message before delivering it again. A batch
	// is settled once its events committed (milliseconds; the runner
	// bounds a settle to 10 s), so 30 s (the server's default) is only
	// reached by a node that died holding messages.
	ackWait = 30 * time.Second
	// pullExpiry and pullHeartbeat: each pull request lives pullExpiry
	// (short, see nakDelay; an idle consumer re-pulls that often) and
	// the server sends an idle heartbeat every pullHeartbeat (at most
	// half the expiry); two missed heartbeats make Receive fail (a pull
	// lost with a restarted server, a silent connection).
	pullExpiry    = 5 * time.Second
	pullHeartbeat = 2 * time.Second
	// nakDelay is when the stream redelivers the messages Close gives
	// back: after this consumer's last pull request expired. The pull
	// stays queued on the server after the client went away, and
	// nats-server 2.9 handles a redelivery aimed at such a pull badly:
	// it drops the message until AckWait and delivers the stream's last
	// message again. Sooner than AckWait all the same.
	nakDelay = pullExpiry + time.Second
	// drainWait is how long Receive waits for each further message of a
	// batch once it has the first: messages the server sent together are
	// still passing through the client's read loop, a millisecond
	// collects them without waiting for new ones.
	drainWait = time.Millisecond
	// closeTimeout bounds Close's Naks and flush.
	closeTimeout = 2 * time.Second
)

// Dial opens a consumer of p.Source (a source.Dialer): it connects, finds
// the stream and creates or updates the durable pull consumer.
func Dial(ctx context.Context, p source.DialParams) (source.Consumer, error) {
	src, conn := p.Source, p.Connection
	durable := src.Durable
	if durable == "" {
		durable = herald.DefaultSourceConsumer
	}
	prefetch := p.Prefetch
	if prefetch <= 0 {
		prefetch = src.PrefetchOrDefault()
	}
	timeout := defaultDialTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	opts := []nats.Option{
		nats.Name(fmt.Sprintf("herald source %s on %s", src.Name, p.Node)),
		nats.Timeout(timeout),
		nats.MaxReconnects(maxReconnects),
		nats.ReconnectWait(reconnectWait),
	}
	if conn.TLS != nil {
		tc, err := destination.TLSConfig(conn.TLS)
		if err != nil {
			return nil, fmt.Errorf("connection %q: %w", conn.Name, err)
		}
		opts = append(opts, nats.Secure(tc))
	}
	nc, err := nats.Connect(conn.URL, opts...)
	if err != nil {
		return nil, dialError(conn.Name, err)
	}
	c, err := open(ctx, nc, src, durable, prefetch)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// open finds the stream, creates or updates the durable and starts
// pulling.
func open(ctx context.Context, nc *nats.Conn, src *herald.Source, durable string, prefetch int) (*Consumer, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	stream, err := js.Stream(ctx, src.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("stream %q does not exist on the NATS server (herald does not create streams)", src.Stream)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return nil, errors.New("JetStream is not enabled on the NATS server")
	case err != nil:
		return nil, fmt.Errorf("looking up stream %q: %s", src.Stream, apiMessage(err))
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxAckPending: prefetch,
		FilterSubject: src.Subject,
	})
	if err != nil {
		return nil, fmt.Errorf("creating or updating the durable consumer %q on stream %q: %s", durable, src.Stream, apiMessage(err))
	}
	c := &Consumer{nc: nc, cons: cons, stream: src.Stream, durable: durable, prefetch: prefetch,
		held: map[jetstream.Msg]struct{}{}}
	if err := c.pull(); err != nil {
		return nil, err
	}
	return c, nil
}

// pull (re)starts the continuous pull: at most prefetch messages per
// request, each request living pullExpiry, heartbeats every
// pullHeartbeat.
func (c *Consumer) pull() error {
	iter, err := c.cons.Messages(
		jetstream.PullMaxMessages(c.prefetch),
		jetstream.PullExpiry(pullExpiry),
		jetstream.PullHeartbeat(pullHeartbeat),
	)
	if err != nil {
		return fmt.Errorf("pulling from the durable consumer %q: %w", c.durable, err)
	}
	c.iter = iter
	return nil
}

// apiMessage is a JetStream API error's description and code, or err's
// text.
func apiMessage(err error) string {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("%s (%d)", apiErr.Description, apiErr.ErrorCode)
	}
	return herald.CleanLine(err.Error(), 200)
}

// dialError words a failed connect; it never holds the URL (it may carry
// a password or token).
func dialError(name string, err error) error {
	var (
		ne net.Error
		oe *net.OpError
	)
	switch {
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("connection %q: dial timed out", name)
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired):
		return fmt.Errorf("connection %q: the server refused the credentials", name)
	case errors.As(err, &oe) && oe.Err != nil:
		return fmt.Errorf("connection %q: %s: %s", name, oe.Op, herald.CleanLine(oe.Err.Error(), 160))
	case errors.Is(err, nats.ErrNoServers):
		return fmt.Errorf("connection %q: no NATS server answered", name)
	}
	msg := err.Error()
	if strings.Contains(msg, "://") || strings.Contains(msg, "@") {
		msg = "dial failed" // URL parse errors quote the URL
	}
	return fmt.Errorf("connection %q: %s", name, herald.CleanLine(msg, 160))
}
