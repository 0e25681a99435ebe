package amqpsrc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
)

// Limits of a dial.
const (
	// handshakeTimeout bounds the TCP connect, TLS and AMQP handshake when
	// the caller's context has no deadline (the runner always sets one).
	handshakeTimeout = 10 * time.Second
	// heartbeat is the AMQP heartbeat asked of the broker: a silent broker
	// (host gone, network cut) closes the connection after about two
	// intervals, and Receive returns an error.
	heartbeat = 10 * time.Second
	// closeTimeout bounds Close's wait for the broker's close-ok.
	closeTimeout = 5 * time.Second
	// maxTag is the longest consumer tag RabbitMQ takes (a short string).
	maxTag = 255
)

// connect opens the AMQP connection of c, bounded by ctx.
func connect(ctx context.Context, c *herald.Connection, name string) (*amqp.Connection, error) {
	cfg := amqp.Config{
		Heartbeat:  heartbeat,
		Properties: amqp.Table{"product": "herald", "connection_name": name},
		Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The library clears this deadline once the AMQP handshake
			// is done; until then heartbeats do not run.
			deadline, ok := ctx.Deadline()
			if !ok {
				deadline = time.Now().Add(handshakeTimeout)
			}
			if err := conn.SetDeadline(deadline); err != nil {
				_ = conn.Close()
				return nil, err
			}
			return conn, nil
		},
	}
	if c.TLS != nil {
		tc, err := destination.TLSConfig(c.TLS)
		if err != nil {
			return nil, fmt.Errorf("connection %q: %w", c.Name, err)
		}
		cfg.TLSClientConfig = tc
	}
	conn, err := amqp.DialConfig(c.URL, cfg)
	if err != nil {
		return nil, dialError(c.Name, err)
	}
	return conn, nil
}

const badURL = "bad URL (want amqp:// or amqps://user:password@host:port/vhost)"

// dialError says why a connection could not be opened. The driver's
// errors may quote the URL, which carries the password: the message is
// built from the error's kind, never from a URL error's text.
func dialError(name string, err error) error {
	var (
		ne   net.Error
		oe   *net.OpError
		ue   *url.Error
		aerr *amqp.Error
	)
	msg := "dial failed"
	switch {
	case errors.Is(err, amqp.ErrCredentials) || errors.Is(err, amqp.ErrSASL):
		msg = "the broker refused the credentials"
	case errors.Is(err, amqp.ErrVhost):
		msg = "the broker refused the virtual host (missing, or no permission)"
	case isTLS(err):
		msg = "tls: " + err.Error()
	case errors.As(err, &ne) && ne.Timeout():
		msg = "dial timed out"
	case errors.As(err, &ue):
		msg = badURL
	case errors.As(err, &oe) && oe.Err != nil:
		// Op and the address (host:port), never the URL.
		msg = oe.Op + ": " + oe.Err.Error()
	case errors.As(err, &aerr):
		msg = fmt.Sprintf("%s (%d)", aerr.Reason, aerr.Code)
	case strings.Contains(strings.ToLower(err.Error()), "amqp"), strings.Contains(err.Error(), "URI"):
		// The driver's URI parse errors (their types are unexported).
		msg = badURL
	}
	return fmt.Errorf("connection %q: %s", name, herald.CleanLine(msg, 200))
}

// isTLS reports a certificate or handshake failure.
func isTLS(err error) bool {
	var (
		cv *tls.CertificateVerificationError
		rh tls.RecordHeaderError
		ae tls.AlertError
		ua x509.UnknownAuthorityError
		hn x509.HostnameError
		ci x509.CertificateInvalidError
	)
	return errors.As(err, &cv) || errors.As(err, &rh) || errors.As(err, &ae) || errors.As(err, &ua) ||
		errors.As(err, &hn) || errors.As(err, &ci)
}

// queueError says why the source's queue cannot be consumed.
func queueError(queue string, err error) error {
	var aerr *amqp.Error
	if errors.As(err, &aerr) {
		switch aerr.Code {
		case amqp.NotFound:
			return fmt.Errorf("queue %q does not exist (herald does not declare it: create it, durable, with a dead-letter exchange for rejected messages)", queue)
		case amqp.AccessRefused:
			return fmt.Errorf("queue %q: access refused: %s", queue, herald.CleanLine(aerr.Reason, 200))
		case amqp.ResourceLocked:
			return fmt.Errorf("queue %q is exclusive to another connection", queue)
		}
		return fmt.Errorf("queue %q: %s (%d)", queue, herald.CleanLine(aerr.Reason, 200), aerr.Code)
	}
	if errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("queue %q: the connection closed while setting up the consumer", queue)
	}
	return fmt.Errorf("queue %q: %s", queue, herald.CleanLine(err.Error(), 200))
}

// consumerTag names this node's consumer in RabbitMQ (list_consumers,
// the management UI): herald, the node, the source and a random suffix so
// that two consumers of one node never collide.
func consumerTag(node, src string) string {
	suffix := "-" + strings.ToLower(herald.NewID(""))
	tag := "herald-" + node + "-" + src
	if len(tag)+len(suffix) > maxTag {
		tag = tag[:maxTag-len(suffix)]
	}
	return tag + suffix
}
