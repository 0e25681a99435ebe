package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/metrics"
	"github.com/heraldhq/herald/push"
	"github.com/heraldhq/herald/store"
)

// pushNode is the Web Push service of a running node with its internal
// (node-to-node) listener.
type pushNode struct {
	srv      *push.Server
	nodeID   string
	internal *http.Server
	iln      net.Listener
}

// startPush builds the push service when --push is on (nil otherwise):
// keys, endpoint URL, node id and the internal listener.
func startPush(c *config, s store.Store, ln net.Listener, limits connLimits, reg prometheus.Registerer, logger *slog.Logger) (*pushNode, error) {
	if !c.Push {
		return nil, nil
	}
	ps, ok := s.(store.PushStore)
	if !ok {
		return nil, errors.New("the store does not implement the Web Push contract")
	}
	keyText, err := pushKeys(c, logger)
	if err != nil {
		return nil, err
	}
	keys, err := push.ParseKeys(keyText)
	if err != nil {
		return nil, fmt.Errorf("--push-crypto-keys: %w", err)
	}
	endpoint := c.PushEndpointURL
	if endpoint == "" {
		endpoint = "http://" + ln.Addr().String()
		if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil && net.ParseIP(host).IsUnspecified() {
			logger.Warn("push endpoints are built on an unspecified address; set --push-endpoint-url to the URL senders use", "endpoint_url", endpoint)
		}
	}
	serverTLS, clientTLS, err := internalTLS(c)
	if err != nil {
		return nil, err
	}
	n := &pushNode{}
	if c.InternalListen != "" {
		n.iln, err = net.Listen("tcp", c.InternalListen)
		if err != nil {
			return nil, fmt.Errorf("error listening on %s (--internal-listen): %w", c.InternalListen, err)
		}
		scheme := "http://"
		if serverTLS != nil {
			n.iln = tls.NewListener(n.iln, serverTLS)
			scheme = "https://"
		}
		// validate required --internal-url when the listener's host
		// is unspecified, so the default names one reachable address.
		internalURL := c.InternalURL
		if internalURL == "" {
			internalURL = scheme + n.iln.Addr().String()
		}
		n.nodeID = push.NewNodeID(internalURL)
	} else {
		// No other node can reach this one: its router records name a
		// local id that only this process serves.
		n.nodeID = push.NewNodeID("")
	}
	n.srv, err = push.New(push.Config{
		Store:            ps,
		Keys:             keys,
		EndpointURL:      strings.TrimRight(endpoint, "/"),
		NodeID:           n.nodeID,
		MsgLimit:         c.PushMsgLimit,
		AckWait:          c.PushAckWait,
		PingInterval:     c.PushPingInterval,
		HandshakeTimeout: c.PushHandshakeTimeout,
		BroadcastPoll:    c.PushBroadcastPoll,
		TLSClientConfig:  clientTLS,
		MaxConns:         limits.push,
		MaxConnsPerIP:    limits.pushPerIP,
		Limits:           c.PushLimits,
		Observer:         metrics.NewPushObserver(reg),
		Logger:           logger,
	})
	if err != nil {
		if n.iln != nil {
			_ = n.iln.Close()
		}
		return nil, err
	}
	reg.MustRegister(metrics.NewPushStatsCollector(ps))
	if n.iln != nil {
		n.internal = &http.Server{Handler: httpapi.ReadDeadline(n.srv.InternalHandler(), c.ReadTimeout), ReadHeaderTimeout: c.ReadTimeout}
		go func() { _ = n.internal.Serve(n.iln) }()
	}
	return n, nil
}

func (n *pushNode) internalAddr() string {
	if n.iln == nil {
		return ""
	}
	return n.iln.Addr().String()
}

// close stops the internal listener and the sessions. Safe on nil.
func (n *pushNode) close() {
	if n == nil {
		return
	}
	if n.internal != nil {
		_ = n.internal.Close()
	}
	_ = n.srv.Close()
}

// pushLimitFlags defines the caps on what one Web Push user agent or
// endpoint may hold or do (push.Limits; defaults push.DefaultLimits).
func (c *config) pushLimitFlags(fs *flag.FlagSet) {
	l, d := &c.PushLimits, push.DefaultLimits
	fs.IntVar(&l.MaxMessagesPerUAID, "push-max-messages-per-uaid", d.MaxMessagesPerUAID, "most messages stored for one offline user agent; a send beyond it is answered 429 with Retry-After (0: no cap)")
	fs.IntVar(&l.MaxMessagesPerChannel, "push-max-messages-per-channel", d.MaxMessagesPerChannel, "most messages stored for one push subscription (channel); a send beyond it is answered 429 with Retry-After (0: no cap)")
	fs.IntVar(&l.MaxChannels, "push-max-channels", d.MaxChannels, "most subscriptions (channels) one user agent registers; a register beyond it is answered with status 409 (0: no cap)")
	fs.Float64Var(&l.RegisterRate, "push-register-rate", d.RegisterRate, "registers per second one user agent may make after --push-register-burst; beyond it a register is answered with status 429 (0: no limit)")
	fs.IntVar(&l.RegisterBurst, "push-register-burst", d.RegisterBurst, "registers one user agent may make at once (a browser re-registers every subscription after a reset)")
	fs.Float64Var(&l.RegisterIPRate, "push-register-ip-rate", d.RegisterIPRate, "registers per second all user agents at one client address (an IPv6 /64) may make after --push-register-ip-burst; beyond it a register is answered with status 429 (0: no limit; per node)")
	fs.IntVar(&l.RegisterIPBurst, "push-register-ip-burst", d.RegisterIPBurst, "registers the user agents at one client address may make at once (the browsers behind an office NAT re-registering after a reset)")
	fs.Float64Var(&l.RegisterNodeRate, "push-register-node-rate", d.RegisterNodeRate, "registers per second this node accepts from all user agents, with a burst of as many; beyond it a register is answered with status 429 (0: no limit)")
	fs.Float64Var(&l.SendRate, "push-send-rate", d.SendRate, "messages per second one push endpoint accepts after --push-send-burst; beyond it a send is answered 429 with Retry-After (0: no limit; per node)")
	fs.IntVar(&l.SendBurst, "push-send-burst", d.SendBurst, "messages one push endpoint accepts at once")
}

func (c *config) validatePushLimits() error {
	l := c.PushLimits
	for name, n := range map[string]int{
		"--push-max-messages-per-uaid": l.MaxMessagesPerUAID, "--push-max-messages-per-channel": l.MaxMessagesPerChannel,
		"--push-max-channels": l.MaxChannels,
	} {
		if n < 0 {
			return fmt.Errorf("%s must not be negative (0: no cap), got %d", name, n)
		}
	}
	for name, r := range map[string]float64{
		"--push-register-rate": l.RegisterRate, "--push-register-ip-rate": l.RegisterIPRate,
		"--push-register-node-rate": l.RegisterNodeRate, "--push-send-rate": l.SendRate,
	} {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return fmt.Errorf("%s must be a rate per second, 0 or more (0: no limit), got %v", name, r)
		}
	}
	for name, n := range map[string]int{
		"--push-register-burst": l.RegisterBurst, "--push-register-ip-burst": l.RegisterIPBurst, "--push-send-burst": l.SendBurst,
	} {
		if n < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", name, n)
		}
	}
	return nil
}

// pushKeys returns --push-crypto-keys, or the keys of <data-dir>/push.keys,
// generated (mode 0600) on the first start. Endpoints handed to user agents
// are encrypted with them: losing the file invalidates every endpoint.
func pushKeys(c *config, logger *slog.Logger) (string, error) {
	if c.PushCryptoKeys != "" {
		return c.PushCryptoKeys, nil
	}
	path := filepath.Join(c.DataDir, "push.keys")
	if b, err := os.ReadFile(path); err == nil {
		return openPushKeys(c, path, strings.TrimSpace(string(b)), logger)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("error reading %s: %w", path, err)
	}
	if c.DatabaseURL != "" {
		logger.Warn("generating push crypto keys for this node only: nodes sharing PostgreSQL need the same --push-crypto-keys", "path", path)
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return "", fmt.Errorf("error creating data directory: %w", err)
	}
	key := push.GenerateKey()
	stored, err := c.keys.Seal(key, pushKeysAAD)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(stored+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("error writing %s: %w", path, err)
	}
	logger.Info("generated the push crypto key", "path", path)
	return key, nil
}
