package mqttsrc

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/source"
)

// Client settings (see the package comment).
const (
	// SessionExpiry is how long (seconds) the broker keeps a consumer's
	// session after its connection ends: the subscription stays, and what
	// the broker routes to it meanwhile is queued (up to Mosquitto's
	// max_queued_messages, 1000 by default; the rest is dropped) and
	// delivered when the same client id connects again. One hour covers a
	// redial and a restart of the node; longer would hold the share of a
	// node that never comes back for longer.
	SessionExpiry = 3600
	// keepAlive is the MQTT keep-alive (seconds): a dead connection is
	// noticed within 1.5 times it.
	keepAlive = 30
	// connectTimeout bounds the connect when the dial's context has no
	// deadline.
	connectTimeout = 10 * time.Second
	// ackInterval is how often paho writes the PUBACKs Settle marked (in
	// receive order); Close waits for the last ones to leave.
	ackInterval = 10 * time.Millisecond
	// closeTimeout bounds the DISCONNECT at Close.
	closeTimeout = 2 * time.Second
	// hashLen is the hex digits of the settings hash in a client id.
	hashLen = 12
)

// Group is the shared-subscription group every node joins: the broker
// hands each message to one of its members.
const Group = herald.DefaultSourceConsumer

// Filter is what a source subscribes to: the shared subscription
// $share/herald/<topic>.
func Filter(topic string) string { return "$share/" + Group + "/" + topic }

// ClientID is the MQTT client id, and so the broker session, of a source
// consumed by node: "herald-<node>-<source>-<hash>" where the hash covers
// node, source name and topic, so that a changed topic starts a new
// session (the old one, subscribed to the old topic, expires) and two
// names that only differ in where a "-" splits them never share one. An
// ordered source has one session whatever the node, "herald-<source>-<hash>":
// its consumer moves with the lease and takes over the session, with the
// messages the previous holder had not acknowledged.
func ClientID(node string, src *herald.Source) string {
	if src.Ordered {
		node = ""
	}
	sum := sha256.Sum256([]byte(node + "\x00" + src.Name + "\x00" + src.Topic))
	h := hex.EncodeToString(sum[:])[:hashLen]
	if node == "" {
		return "herald-" + src.Name + "-" + h
	}
	return "herald-" + node + "-" + src.Name + "-" + h
}

// Dial opens a consumer of p.Source: it connects with the source's client
// id, resuming its session (CleanStart false, SessionExpiry), with a
// receive maximum of p.Prefetch, and subscribes at QoS 1 to
// Filter(topic). It implements source.Dialer.
func Dial(ctx context.Context, p source.DialParams) (source.Consumer, error) {
	src := p.Source
	if err := herald.CheckMQTTTopicFilter(src.Topic); err != nil {
		return nil, fmt.Errorf("MQTT source topic %q %w", herald.CleanLine(src.Topic, 64), err)
	}
	srv, err := server(p.Connection)
	if err != nil {
		return nil, err
	}
	prefetch := min(max(p.Prefetch, 1), 65535) // Receive Maximum is a 16-bit count
	c := newConsumer(prefetch)

	up := make(chan *paho.Connack, 1)
	failed := make(chan error, 1)
	timeout := connectTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{srv.url},
		TlsCfg:                        srv.tls,
		KeepAlive:                     keepAlive,
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         SessionExpiry,
		// One connection per consumer: the runner redials (with its own
		// backoff) when Receive reports the connection gone. The second
		// attempt's delay only matters until Dial gives up on the first.
		ReconnectBackoff: func(attempt int) time.Duration {
			if attempt == 0 {
				return 0
			}
			return time.Second
		},
		ConnectTimeout:  timeout,
		ConnectUsername: srv.user,
		ConnectPassword: srv.password,
		ConnectPacketBuilder: func(cp *paho.Connect, _ *url.URL) (*paho.Connect, error) {
			if cp.Properties == nil {
				cp.Properties = &paho.ConnectProperties{}
			}
			rm := uint16(prefetch)
			cp.Properties.ReceiveMaximum = &rm
			return cp, nil
		},
		OnConnectionUp: func(_ *autopaho.ConnectionManager, ca *paho.Connack) {
			select {
			case up <- ca:
			default:
			}
		},
		OnConnectionDown: func() bool {
			c.setLost("connection to the MQTT broker lost")
			return false
		},
		OnConnectError: func(err error) {
			select {
			case failed <- err:
			default:
			}
		},
		ClientConfig: paho.ClientConfig{
			ClientID:                   ClientID(p.Node, src),
			EnableManualAcknowledgment: true,
			SendAcksInterval:           ackInterval,
			OnPublishReceived:          []func(paho.PublishReceived) (bool, error){c.received},
			OnServerDisconnect: func(d *paho.Disconnect) {
				m := fmt.Sprintf("the MQTT broker disconnected (reason 0x%02x)", d.ReasonCode)
				if d.Properties != nil && d.Properties.ReasonString != "" {
					m += ": " + herald.CleanLine(d.Properties.ReasonString, 120)
				}
				c.setLost(m)
			},
			OnClientError: func(err error) {
				c.setLost("connection to the MQTT broker lost: " + herald.CleanLine(err.Error(), 160))
			},
		},
	}
	cctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(cctx, cfg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("MQTT client: %w", err)
	}
	c.cm, c.cancel = cm, cancel
	fail := func(err error) (source.Consumer, error) {
		c.shut(false)
		return nil, err
	}

	var ca *paho.Connack
	select {
	case ca = <-up:
	case err := <-failed:
		return fail(connectError(err))
	case <-ctx.Done():
		return fail(fmt.Errorf("connecting to the MQTT broker: %w", ctx.Err()))
	}
	if ca.Properties != nil && !ca.Properties.SharedSubAvailable {
		return fail(errors.New("the MQTT broker does not support shared subscriptions ($share/...), which MQTT sources need"))
	}
	if err := c.subscribe(ctx, Filter(src.Topic)); err != nil {
		return fail(err)
	}
	return c, nil
}

// subscribe subscribes at QoS 1 to filter and waits for the SUBACK.
func (c *consumer) subscribe(ctx context.Context, filter string) error {
	// A connection lost before the SUBACK (taken over by another client
	// with this id, dropped) ends the wait at once.
	sctx, cancelSub := context.WithCancel(ctx)
	defer cancelSub()
	go func() {
		select {
		case <-c.lost:
			cancelSub()
		case <-sctx.Done():
		}
	}()
	sa, err := c.cm.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}})
	select {
	case <-c.lost:
		return fmt.Errorf("subscribing to %q: %w", filter, c.lostErr())
	default:
	}
	switch {
	case sa != nil && len(sa.Reasons) > 0 && sa.Reasons[0] >= 0x80:
		m := fmt.Sprintf("the MQTT broker refused the subscription to %q (SUBACK reason 0x%02x)", filter, sa.Reasons[0])
		if sa.Properties != nil && sa.Properties.ReasonString != "" {
			m += ": " + herald.CleanLine(sa.Properties.ReasonString, 120)
		}
		return errors.New(m)
	case err != nil:
		return fmt.Errorf("subscribing to %q: %s", filter, herald.CleanLine(err.Error(), 160))
	}
	return nil
}

// connectError words a failed connect without the URL (autopaho's error
// names the server URL; ours has no credentials, but errors name no URL).
func connectError(err error) error {
	var cerr *autopaho.ConnackError
	if errors.As(err, &cerr) {
		m := fmt.Sprintf("the MQTT broker refused the connection (CONNACK reason 0x%02x)", cerr.ReasonCode)
		if cerr.Reason != "" {
			m += ": " + herald.CleanLine(cerr.Reason, 120)
		}
		return errors.New(m)
	}
	if inner := errors.Unwrap(err); inner != nil {
		err = inner
	}
	return fmt.Errorf("connecting to the MQTT broker: %s", herald.CleanLine(err.Error(), 200))
}

// serverConfig is where and how a connection's consumers connect.
type serverConfig struct {
	url            *url.URL // without credentials
	tls            *tls.Config
	user           string
	password       []byte
	secure, socket bool
}

// server reads a connection's URL: mqtt:// or tcp:// (port 1883 by
// default), mqtts://, ssl:// or tls:// (8883), ws:// or wss:// (a
// WebSocket URL with its path); user and password from the URL. TLS
// follows the connection's tls settings (destination.ApplyTLS).
func server(conn *herald.Connection) (*serverConfig, error) {
	u, err := url.Parse(conn.URL)
	if err != nil {
		// url's errors quote the URL, which may hold a password.
		return nil, errors.New("bad MQTT URL")
	}
	s := &serverConfig{}
	port := "1883"
	switch u.Scheme {
	case "mqtt", "tcp":
	case "mqtts", "ssl", "tls":
		s.secure, port = true, "8883"
	case "ws":
		s.socket = true
	case "wss":
		s.secure, s.socket = true, true
	default:
		return nil, fmt.Errorf("MQTT URL scheme %q is not one of mqtt, mqtts, tcp, ssl, tls, ws, wss", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errors.New("MQTT URL has no host")
	}
	if u.Port() == "" && !s.socket {
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	if u.User != nil {
		s.user = u.User.Username()
		pw, _ := u.User.Password()
		s.password = []byte(pw)
	}
	bare := *u
	bare.User = nil
	s.url = &bare
	if s.secure || conn.TLS != nil {
		s.tls = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
		if conn.TLS != nil {
			if err := destination.ApplyTLS(s.tls, conn.TLS); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}
