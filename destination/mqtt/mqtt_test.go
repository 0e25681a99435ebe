package mqttdest_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/destination/desttest"
	mqttdest "github.com/heraldhq/herald/destination/mqtt"
	"github.com/heraldhq/herald/webhook"
)

// secret signs every test request.
var secret = webhook.NewSecret()

// request is one attempt of an event to d.
func request(d herald.Destination) *webhook.Request {
	evt := herald.NewID(herald.PrefixEvent)
	return &webhook.Request{
		Body:      []byte(`{"id":"` + evt + `","type":"order.paid","data":{"n":1}}`),
		MsgID:     herald.NewID(herald.PrefixDelivery),
		Secrets:   []string{secret},
		Attempt:   2,
		EventType: "order.paid",
		Timeout:   5 * time.Second,
		EventID:   evt,
		Tenant:    "acme",

		Destination: d,
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// One Send is one QoS 1 message: the body, application/json, the signature
// headers as user properties, verifiable as a webhook's.
func TestSendPublishesOneSignedMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.Publisher(t)
	d, c := h.Target(t)
	r := request(d)
	res := p.Send(context.Background(), r)
	require.True(t, res.Success, "%s: %s", res.Class, res.Message)
	require.Empty(t, res.Excerpt, "a subscriber was there")

	m, err := c.(*consumer).next(waitCtx(t))
	require.NoError(t, err)
	require.Equal(t, d.Topic, m.Topic)
	require.Equal(t, byte(1), m.QoS)
	require.False(t, m.Retain)
	require.Equal(t, string(r.Body), string(m.Payload))
	require.Equal(t, "application/json", m.Properties.ContentType)
	props := map[string]string{}
	var keys []string
	for _, u := range m.Properties.User {
		props[u.Key] = u.Value
		keys = append(keys, u.Key)
	}
	require.Equal(t, []string{"herald-attempt", "herald-event-type", "herald-tenant",
		"webhook-id", "webhook-signature", "webhook-timestamp"}, keys)
	require.Equal(t, r.MsgID, props["webhook-id"])
	require.Equal(t, "2", props["herald-attempt"])
	require.Equal(t, "order.paid", props["herald-event-type"])
	require.Equal(t, "acme", props["herald-tenant"])

	hdr := http.Header{}
	for k, v := range props {
		hdr.Set(k, v)
	}
	require.NoError(t, webhook.Verify([]string{secret}, hdr, m.Payload, time.Now(), 0))
	require.Error(t, webhook.Verify([]string{webhook.NewSecret()}, hdr, m.Payload, time.Now(), 0))

	// Exactly one message per Send.
	require.True(t, p.Send(context.Background(), request(d)).Success)
	m2, err := c.(*consumer).next(waitCtx(t))
	require.NoError(t, err)
	require.NotEqual(t, r.MsgID, m2.Properties.User.Get("webhook-id"), "the first Send was delivered once")
}

func TestDefaultTopic(t *testing.T) {
	t.Parallel()
	require.Equal(t, "invoice/paid", mqttdest.DefaultTopic("invoice.paid"))
	require.Equal(t, "a_b_c/d", mqttdest.DefaultTopic("a+b#c.d"))
	require.Equal(t, "_SYS/x", mqttdest.DefaultTopic("$SYS.x"))
	require.NoError(t, mqttdest.ValidTopic(mqttdest.DefaultTopic("a+b#c.d")))
	require.NoError(t, mqttdest.ValidTopic(mqttdest.DefaultTopic("$SYS.x")))
	for _, bad := range []string{"", "a/+/b", "a/#", "+", "a\x00b", strings.Repeat("x", herald.MaxBrokerNameBytes+1), "\xff", "$SYS/x"} {
		require.Error(t, mqttdest.ValidTopic(bad), "%q", bad)
	}

	// Live: no topic publishes to the type's.
	h := newHarness(t)
	p := h.Publisher(t)
	typ := fmt.Sprintf("herald-test.%d.created", time.Now().UnixNano())
	topic := mqttdest.DefaultTopic(typ)
	require.Equal(t, strings.ReplaceAll(typ, ".", "/"), topic)
	c := h.subscribe(t, topic)
	r := request(herald.Destination{Type: herald.DestinationMQTT, Connection: connName})
	r.EventType = typ
	require.True(t, p.Send(context.Background(), r).Success)
	m, err := c.next(waitCtx(t))
	require.NoError(t, err)
	require.Equal(t, topic, m.Topic)
}

// A wildcard in the topic is refused before anything is sent: the
// connection below has no broker, yet the class is invalid_request.
func TestWildcardTopicRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	conns := destination.NewStatic(&herald.Connection{Name: "down", Type: herald.DestinationMQTT,
		URL: "mqtt://" + closedPort(t), AllTenants: true})
	p := mqttdest.New(mqttdest.Config{Connections: conns})
	t.Cleanup(p.Close)
	for _, topic := range []string{"orders/+/paid", "orders/#", "a\x00b", "$SYS/broker/x"} {
		res := p.Send(context.Background(), request(herald.Destination{Type: herald.DestinationMQTT, Connection: "down", Topic: topic}))
		require.Equal(t, herald.ErrorInvalidRequest, res.Class, "%q: %s", topic, res.Message)
	}
}

// A broker that is not there fails attempts as connection errors, at once.
func TestBrokerDownIsConnectionError(t *testing.T) {
	t.Parallel()
	conns := destination.NewStatic(&herald.Connection{Name: "down", Type: herald.DestinationMQTT,
		URL: "mqtt://" + closedPort(t), AllTenants: true})
	p := mqttdest.New(mqttdest.Config{Connections: conns})
	t.Cleanup(p.Close)
	d := herald.Destination{Type: herald.DestinationMQTT, Connection: "down", Topic: "t"}
	for range 3 {
		res := p.Send(context.Background(), request(d))
		require.Equal(t, herald.ErrorConnection, res.Class, res.Message)
		require.Contains(t, res.Message, "refused")
	}
}

// A broker that accepts but never answers CONNECT times out within the
// attempt's timeout.
func TestSilentBrokerTimesOut(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	conns := destination.NewStatic(&herald.Connection{Name: "silent", Type: herald.DestinationMQTT,
		URL: "mqtt://" + ln.Addr().String(), AllTenants: true})
	p := mqttdest.New(mqttdest.Config{Connections: conns})
	t.Cleanup(p.Close)
	r := request(herald.Destination{Type: herald.DestinationMQTT, Connection: "silent", Topic: "t"})
	r.Timeout = 300 * time.Millisecond
	res := p.Send(context.Background(), r)
	require.Equal(t, herald.ErrorTimeout, res.Class, res.Message)
	require.Contains(t, res.Message, "300ms")
}

// retain: a subscriber arriving later gets the retained message; without
// retain it gets nothing but what is published after it subscribed.
func TestRetain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.Publisher(t)
	ctx := context.Background()

	retained := herald.Destination{Type: herald.DestinationMQTT, Connection: connName, Topic: h.topic(t), Retain: true}
	t.Cleanup(func() { // clear the retained message
		clear := request(retained)
		clear.Body = nil
		_ = p.Send(ctx, clear)
	})
	r := request(retained)
	res := p.Send(ctx, r)
	require.True(t, res.Success, "%s: %s", res.Class, res.Message)
	require.Equal(t, "PUBACK 0x10: no matching subscribers", res.Excerpt)
	m, err := h.subscribe(t, retained.Topic).next(waitCtx(t))
	require.NoError(t, err)
	require.True(t, m.Retain)
	require.Equal(t, r.MsgID, m.Properties.User.Get("webhook-id"))

	plain := herald.Destination{Type: herald.DestinationMQTT, Connection: connName, Topic: h.topic(t)}
	require.True(t, p.Send(ctx, request(plain)).Success)
	late := h.subscribe(t, plain.Topic)
	sentinel := request(plain)
	require.True(t, p.Send(ctx, sentinel).Success)
	m, err = late.next(waitCtx(t))
	require.NoError(t, err)
	require.Equal(t, sentinel.MsgID, m.Properties.User.Get("webhook-id"), "the first message was not retained")
	require.False(t, m.Retain)
}

// Changing a connection's URL makes the next attempt use the new one.
func TestConnectionURLChangeRedials(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.Publisher(t)
	d, _ := h.Target(t)
	ctx := context.Background()
	require.True(t, p.Send(ctx, request(d)).Success)
	h.conns.Put(&herald.Connection{Name: connName, Type: herald.DestinationMQTT, URL: "mqtt://" + closedPort(t), AllTenants: true})
	require.Equal(t, herald.ErrorConnection, p.Send(ctx, request(d)).Class)
	h.conns.Put(&herald.Connection{Name: connName, Type: herald.DestinationMQTT, URL: h.url, AllTenants: true})
	res := p.Send(ctx, request(d))
	require.True(t, res.Success, "%s: %s", res.Class, res.Message)
}

// Client ids are unique per node and connection.
func TestClientID(t *testing.T) {
	t.Parallel()
	a := mqttdest.New(mqttdest.Config{})
	b := mqttdest.New(mqttdest.Config{})
	require.NotEqual(t, a.ClientID("c"), b.ClientID("c"), "two nodes on one host")
	require.NotEqual(t, a.ClientID("c"), a.ClientID("d"))
	require.Equal(t, "herald-n1-c", mqttdest.New(mqttdest.Config{NodeID: "n1"}).ClientID("c"))
}

// What the destination or its connection gets wrong fails before sending.
func TestInvalidDestinations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.Publisher(t)
	ctx := context.Background()
	res := p.Send(ctx, request(herald.Destination{Type: herald.DestinationMQTT, Connection: "nope", Topic: "t"}))
	require.Equal(t, herald.ErrorConnectionUnset, res.Class)

	h.conns.Put(&herald.Connection{Name: "bad", Type: herald.DestinationMQTT, URL: "http://u:secretpw@127.0.0.1/", AllTenants: true})
	res = p.Send(ctx, request(herald.Destination{Type: herald.DestinationMQTT, Connection: "bad", Topic: "t"}))
	require.Equal(t, herald.ErrorConnectionUnset, res.Class)
	require.NotContains(t, res.Message, "secretpw")

	r := request(herald.Destination{Type: herald.DestinationMQTT, Connection: connName, Topic: "t"})
	r.Secrets = nil
	require.Equal(t, herald.ErrorInvalidRequest, p.Send(ctx, r).Class, "never an unsigned message")

	p.Close()
	res = p.Send(ctx, request(herald.Destination{Type: herald.DestinationMQTT, Connection: connName, Topic: "t"}))
	require.Equal(t, herald.ErrorConnection, res.Class)
}

// An attempt stuck on a broker that does not answer holds no other
// connection's attempts: they complete while it waits, and it ends as a
// connection error when the server goes away.
func TestStuckBrokerDoesNotHoldOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	silent := desttest.NewHoldingServer(t)
	h.conns.Put(&herald.Connection{Name: "silent", Type: herald.DestinationMQTT, URL: "mqtt://" + silent.Addr, AllTenants: true})
	p := h.Publisher(t)

	done := make(chan webhook.Result, 1)
	go func() {
		r := request(herald.Destination{Type: herald.DestinationMQTT, Connection: "silent", Topic: "t"})
		r.Timeout = time.Minute
		done <- p.Send(context.Background(), r)
	}()
	select {
	case <-silent.Accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck attempt never connected")
	}
	d, c := h.Target(t)
	for range 20 {
		res := p.Send(context.Background(), request(d))
		require.True(t, res.Success, "%s: %s", res.Class, res.Message)
		_, err := c.Next(waitCtx(t))
		require.NoError(t, err)
	}
	select {
	case res := <-done:
		// Only the client's own connect timeout (5 s) could end it this early.
		t.Fatalf("the stuck attempt ended before the others were sent: %s %s", res.Class, res.Message)
	default:
	}
	silent.Release()
	res := <-done
	require.Equal(t, herald.ErrorConnection, res.Class, res.Message)
}

// A client no attempt used for 10 minutes (its connection deleted, say) is
// disconnected; one in use stays.
func TestIdleClientClosed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.conns.Put(&herald.Connection{Name: "other", Type: herald.DestinationMQTT, URL: h.url, AllTenants: true})
	p := mqttdest.New(mqttdest.Config{Connections: h.conns})
	t.Cleanup(p.Close)
	now := time.Now()
	mqttdest.SetNow(p, func() time.Time { return now })
	d := herald.Destination{Type: herald.DestinationMQTT, Connection: connName, Topic: h.topic(t)}
	other := d
	other.Connection = "other"
	ctx := context.Background()
	require.True(t, p.Send(ctx, request(d)).Success)
	require.True(t, p.Send(ctx, request(other)).Success)
	require.Equal(t, 2, mqttdest.Clients(p))

	now = now.Add(9 * time.Minute)
	require.True(t, p.Send(ctx, request(d)).Success)
	require.Equal(t, 2, mqttdest.Clients(p), "9 minutes idle is not enough")
	now = now.Add(2 * time.Minute) // "other" idle 11 minutes, d 2
	require.True(t, p.Send(ctx, request(d)).Success)
	require.Equal(t, 1, mqttdest.Clients(p))
	res := p.Send(ctx, request(other))
	require.True(t, res.Success, "a swept connection connects again when used: %s %s", res.Class, res.Message)
	require.Equal(t, 2, mqttdest.Clients(p))
}

// tlsServer is a TLS listener with a certificate no system trusts; it
// writes its PEM to a file for a connection's tls.ca_file.
func tlsServer(t *testing.T) (addr, caFile string) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	return srv.Listener.Addr().String(), caFile
}

// An untrusted certificate fails as tls; trusted through tls.ca_file the
// handshake passes (and the server, not an MQTT broker, fails otherwise).
func TestTLS(t *testing.T) {
	t.Parallel()
	addr, caFile := tlsServer(t)
	conns := destination.NewStatic(
		&herald.Connection{Name: "untrusted", Type: herald.DestinationMQTT, URL: "mqtts://" + addr, AllTenants: true},
		&herald.Connection{Name: "trusted", Type: herald.DestinationMQTT, URL: "mqtts://" + addr, AllTenants: true,
			TLS: &herald.ConnectionTLS{CAFile: caFile}})
	p := mqttdest.New(mqttdest.Config{Connections: conns})
	t.Cleanup(p.Close)
	res := p.Send(context.Background(), request(herald.Destination{Type: herald.DestinationMQTT, Connection: "untrusted", Topic: "t"}))
	require.Equal(t, herald.ErrorTLS, res.Class, res.Message)
	require.Contains(t, res.Message, "certificate")

	// An HTTPS server never answers CONNECT: the attempt ends at its
	// timeout, past the handshake.
	r := request(herald.Destination{Type: herald.DestinationMQTT, Connection: "trusted", Topic: "t"})
	r.Timeout = time.Second
	res = p.Send(context.Background(), r)
	require.False(t, res.Success)
	require.NotEqual(t, herald.ErrorTLS, res.Class, "the CA file is trusted: %s", res.Message)
}

// scriptedPeer is the MQTT side of one connection, scripted: it answers
// CONNECT and PINGREQ, hands the first PUBLISH to onPublish, then closes
// the connection; reconnects are refused. It tests herald's handling of
// answers the machine's Mosquitto cannot be made to give (every other test
// runs against Mosquitto itself).
func scriptedPeer(t *testing.T, onPublish func(c net.Conn, p *packets.Publish)) (addr string, published <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	done := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		_ = ln.Close() // reconnects are refused
		if err != nil {
			return
		}
		defer c.Close()
		if cp, err := packets.ReadPacket(c); err != nil || cp.Type != packets.CONNECT {
			return
		}
		if _, err := packets.NewControlPacket(packets.CONNACK).WriteTo(c); err != nil {
			return
		}
		for {
			cp, err := packets.ReadPacket(c)
			if err != nil {
				return
			}
			switch cp.Type {
			case packets.PINGREQ:
				if _, err := packets.NewControlPacket(packets.PINGRESP).WriteTo(c); err != nil {
					return
				}
			case packets.PUBLISH:
				onPublish(c, cp.Content.(*packets.Publish))
				close(done)
				return
			default:
				return
			}
		}
	}()
	return ln.Addr().String(), done
}

// sendVia makes one attempt (timeout 1 minute) through a connection to addr.
func sendVia(t *testing.T, addr string) webhook.Result {
	conns := destination.NewStatic(&herald.Connection{Name: "scripted", Type: herald.DestinationMQTT,
		URL: "mqtt://" + addr, AllTenants: true})
	p := mqttdest.New(mqttdest.Config{Connections: conns})
	t.Cleanup(p.Close)
	r := request(herald.Destination{Type: herald.DestinationMQTT, Connection: "scripted", Topic: "t"})
	r.Timeout = time.Minute
	return p.Send(context.Background(), r)
}

// A connection lost while an attempt waits for its PUBACK ends the attempt
// at once as a connection error, not at its timeout: the session ends
// with the connection, so no PUBACK can come.
func TestConnectionLostBeforePuback(t *testing.T) {
	t.Parallel()
	addr, published := scriptedPeer(t, func(net.Conn, *packets.Publish) {}) // no PUBACK; the connection closes
	res := sendVia(t, addr)
	require.Equal(t, herald.ErrorConnection, res.Class, res.Message)
	require.Contains(t, res.Message, "lost before the PUBACK")
	select {
	case <-published:
	default:
		t.Fatal("the broker never got the PUBLISH")
	}
}

// A PUBACK reason code >= 0x80 is the broker's refusal: broker, with the
// code and the broker's reason, retried through the tiers.
func TestPubackRefusalIsBrokerError(t *testing.T) {
	t.Parallel()
	addr, _ := scriptedPeer(t, func(c net.Conn, p *packets.Publish) {
		ack := packets.NewControlPacket(packets.PUBACK)
		ack.Content.(*packets.Puback).PacketID = p.PacketID
		ack.Content.(*packets.Puback).ReasonCode = packets.PubackQuotaExceeded
		ack.Content.(*packets.Puback).Properties = &packets.Properties{ReasonString: "over the tenant's quota"}
		_, _ = ack.WriteTo(c)
	})
	res := sendVia(t, addr)
	require.Equal(t, herald.ErrorBroker, res.Class, res.Message)
	require.Contains(t, res.Message, "0x97")
	require.Contains(t, res.Message, "over the tenant's quota")
	require.False(t, res.Permanent)
}
