package webhook

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// ErrForbidden is wrapped by every *ForbiddenError, so callers can test
// errors.Is(err, ErrForbidden) through the net/http error chain.
var ErrForbidden = errors.New("destination address forbidden")

// ForbiddenError is returned when the Guard refuses to connect to IP.
type ForbiddenError struct {
	IP netip.Addr
	// Reason names the range that matched: "loopback", "private",
	// "link-local", "cloud metadata", "multicast", ...
	Reason string
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("destination %s forbidden: %s address", e.IP, e.Reason)
}

func (e *ForbiddenError) Unwrap() error { return ErrForbidden }

// Guard decides which addresses outbound deliveries may connect to. It is
// installed as net.Dialer.Control, so it sees the address of every connection
// after DNS resolution: a hostname that resolves (or re-resolves, DNS
// rebinding) to an internal address is refused just like an IP literal, and
// with Happy Eyeballs each candidate address is checked on its own.
//
// The zero Guard (and a nil *Guard) refuses loopback and private ranges; that
// is the production default. Some ranges are refused whatever the settings,
// because no legitimate webhook receiver lives there and they are the classic
// SSRF targets: unspecified (0.0.0.0/8, ::), link-local (169.254.0.0/16,
// fe80::/10) including the cloud metadata endpoints, the metadata addresses
// outside link-local (fd00:ec2::254, 100.100.100.200, 168.63.129.16),
// multicast, and the reserved/broadcast block 240.0.0.0/4.
type Guard struct {
	// AllowLoopback permits 127.0.0.0/8 and ::1 (herald's --dev mode, tests).
	AllowLoopback bool
	// AllowPrivate permits private and shared ranges: 10/8, 172.16/12,
	// 192.168/16, 100.64/10 (CGNAT), fc00::/7, and the other non-global
	// blocks 192.0.0.0/24, 198.18.0.0/15 and fec0::/10.
	AllowPrivate bool
	// Allow lists extra prefixes that may be reached even though they are
	// loopback or private (say, one internal receiver). It can not open the
	// always-refused ranges.
	Allow []netip.Prefix
}

// addrClass is how the guard sees one address.
type addrClass int

const (
	classPublic addrClass = iota
	classLoopback
	classPrivate
	classRefused // never allowed
)

type rangeRule struct {
	prefix netip.Prefix
	class  addrClass
	reason string
}

// rules are checked in order; the first match wins, so the always-refused
// metadata addresses come before the private ranges that contain them
// (fd00:ec2::254 is inside fc00::/7, 100.100.100.200 inside 100.64/10).
var rules = []rangeRule{
	{netip.MustParsePrefix("169.254.169.254/32"), classRefused, "cloud metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), classRefused, "cloud metadata"},
	{netip.MustParsePrefix("100.100.100.200/32"), classRefused, "cloud metadata"}, // Alibaba Cloud
	{netip.MustParsePrefix("168.63.129.16/32"), classRefused, "cloud metadata"},   // Azure WireServer
	{netip.MustParsePrefix("0.0.0.0/8"), classRefused, "unspecified"},
	{netip.MustParsePrefix("::/128"), classRefused, "unspecified"},
	{netip.MustParsePrefix("169.254.0.0/16"), classRefused, "link-local"},
	{netip.MustParsePrefix("fe80::/10"), classRefused, "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), classRefused, "multicast"},
	{netip.MustParsePrefix("ff00::/8"), classRefused, "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), classRefused, "reserved or broadcast"},

	{netip.MustParsePrefix("127.0.0.0/8"), classLoopback, "loopback"},
	{netip.MustParsePrefix("::1/128"), classLoopback, "loopback"},

	{netip.MustParsePrefix("10.0.0.0/8"), classPrivate, "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), classPrivate, "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), classPrivate, "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), classPrivate, "private"},
	{netip.MustParsePrefix("fc00::/7"), classPrivate, "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), classPrivate, "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), classPrivate, "private"},
	{netip.MustParsePrefix("fec0::/10"), classPrivate, "private"},
}

// IPv6 forms that carry an IPv4 address a router or the kernel may turn back
// into that IPv4 destination. Each is checked as its embedded IPv4 address too
// (Convoy's guard does the same for NAT64 and 6to4).
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	sixToFour      = netip.MustParsePrefix("2002::/16")      // RFC 3056
	ipv4Compatible = netip.MustParsePrefix("::/96")          // deprecated, RFC 4291
)

// classify returns the class of a (non-IPv4-mapped) address.
func classify(ip netip.Addr) (addrClass, string) {
	for _, r := range rules {
		if r.prefix.Contains(ip) {
			return r.class, r.reason
		}
	}
	return classPublic, ""
}

// embeddedIPv4 returns the IPv4 address carried by a NAT64, 6to4 or
// IPv4-compatible IPv6 address.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case nat64WellKnown.Contains(ip), nat64Local.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case ipv4Compatible.Contains(ip):
		// :: and ::1 are classified as themselves.
		v4 := netip.AddrFrom4([4]byte(b[12:16]))
		if v4.As4()[0] == 0 {
			return netip.Addr{}, false
		}
		return v4, true
	}
	return netip.Addr{}, false
}

// Check reports whether the guard allows connecting to ip; the refusal is a
// *ForbiddenError. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are judged as
// the IPv4 address they are, and zones are ignored.
func (g *Guard) Check(ip netip.Addr) error {
	if !ip.IsValid() {
		return &ForbiddenError{IP: ip, Reason: "invalid"}
	}
	ip = ip.WithZone("").Unmap()
	class, reason := classify(ip)
	inner := ip
	if v4, ok := embeddedIPv4(ip); ok {
		// The stricter of the two classes decides.
		if c, r := classify(v4); c > class {
			class, reason, inner = c, r, v4
		}
	}
	switch class {
	case classPublic:
		return nil
	case classRefused:
		return &ForbiddenError{IP: ip, Reason: reason}
	}
	if g != nil {
		if class == classLoopback && g.AllowLoopback || class == classPrivate && g.AllowPrivate {
			return nil
		}
		for _, p := range g.Allow {
			if p.Contains(ip) || inner != ip && p.Contains(inner) {
				return nil
			}
		}
	}
	return &ForbiddenError{IP: ip, Reason: reason}
}

// Control has the signature of net.Dialer.Control. address is the resolved
// "ip:port" the dialer is about to connect to; anything that does not parse
// as one is refused (fail closed).
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &ForbiddenError{Reason: "unparseable (" + network + ")"}
	}
	return g.Check(ap.Addr())
}
