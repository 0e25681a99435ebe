package webhook

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGuardCheck(t *testing.T) {
	t.Parallel()

	strict := &Guard{}
	loopback := &Guard{AllowLoopback: true}
	private := &Guard{AllowPrivate: true}
	everything := &Guard{
		AllowLoopback: true,
		AllowPrivate:  true,
		// An allow-list can not open the always-refused ranges.
		Allow: []netip.Prefix{
			netip.MustParsePrefix("0.0.0.0/0"),
			netip.MustParsePrefix("::/0"),
		},
	}
	allowOne := &Guard{Allow: []netip.Prefix{
		netip.MustParsePrefix("10.1.2.0/24"),
		netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("fd12::/16"),
	}}

	tests := []struct {
		name  string
		guard *Guard
		ip    string
		ok    bool
	}{
		// Public addresses pass every guard, nil included.
		{"public v4", strict, "93.184.216.34", true},
		{"public v6", strict, "2606:2800:220:1:248:1893:25c8:1946", true},
		{"public v4 nil guard", nil, "8.8.8.8", true},
		{"public v4-mapped", strict, "::ffff:8.8.8.8", true},
		{"public next to private", strict, "172.32.0.1", true},
		{"public next to CGNAT", strict, "100.128.0.1", true},

		// Always refused, even by a guard that allows everything else.
		{"unspecified v4", everything, "0.0.0.0", false},
		{"this network", everything, "0.1.2.3", false},
		{"unspecified v6", everything, "::", false},
		{"link-local v4", everything, "169.254.1.1", false},
		{"AWS/GCP/Azure metadata", everything, "169.254.169.254", false},
		{"metadata v4-mapped", everything, "::ffff:169.254.169.254", false},
		{"AWS metadata v6", everything, "fd00:ec2::254", false},
		{"Alibaba metadata", everything, "100.100.100.200", false},
		{"Azure WireServer", everything, "168.63.129.16", false},
		{"link-local v6", everything, "fe80::1", false},
		{"link-local v6 with zone", everything, "fe80::1%eth0", false},
		{"multicast v4", everything, "224.0.0.1", false},
		{"multicast v6", everything, "ff02::1", false},
		{"broadcast", everything, "255.255.255.255", false},
		{"reserved class E", everything, "240.0.0.1", false},
		{"metadata via NAT64", everything, "64:ff9b::a9fe:a9fe", false},
		{"metadata via 6to4", everything, "2002:a9fe:a9fe::1", false},

		// Loopback needs AllowLoopback or an Allow prefix.
		{"loopback strict", strict, "127.0.0.1", false},
		{"loopback nil guard", nil, "127.0.0.1", false},
		{"loopback other", strict, "127.1.2.3", false},
		{"loopback v6 strict", strict, "::1", false},
		{"loopback v4-mapped strict", strict, "::ffff:127.0.0.1", false},
		{"loopback via NAT64 strict", strict, "64:ff9b::7f00:1", false},
		{"loopback via 6to4 strict", strict, "2002:7f00:1::", false},
		{"loopback IPv4-compatible strict", strict, "::127.0.0.1", false},
		{"loopback allowed", loopback, "127.0.0.1", true},
		{"loopback v6 allowed", loopback, "::1", true},
		{"loopback v4-mapped allowed", loopback, "::ffff:127.0.0.1", true},
		{"loopback does not allow private", loopback, "10.0.0.1", false},
		{"loopback by prefix", allowOne, "127.0.0.1", true},
		{"loopback outside prefix", allowOne, "127.0.0.2", false},

		// Private ranges need AllowPrivate or an Allow prefix.
		{"10/8 strict", strict, "10.0.0.1", false},
		{"172.16/12 strict", strict, "172.31.255.255", false},
		{"192.168/16 strict", strict, "192.168.1.1", false},
		{"CGNAT strict", strict, "100.64.0.1", false},
		{"ULA strict", strict, "fd12:3456::1", false},
		{"benchmarking strict", strict, "198.18.0.1", false},
		{"private v4-mapped strict", strict, "::ffff:10.0.0.1", false},
		{"private v4-mapped 192.168 strict", strict, "::ffff:192.168.0.1", false},
		{"private via NAT64 strict", strict, "64:ff9b::a00:1", false},
		{"10/8 allowed", private, "10.0.0.1", true},
		{"172.16/12 allowed", private, "172.16.0.1", true},
		{"192.168/16 allowed", private, "192.168.1.1", true},
		{"CGNAT allowed", private, "100.64.0.1", true},
		{"ULA allowed", private, "fc00::1", true},
		{"private v4-mapped allowed", private, "::ffff:10.0.0.1", true},
		{"private does not allow loopback", private, "127.0.0.1", false},
		{"private by prefix", allowOne, "10.1.2.3", true},
		{"private by prefix v4-mapped", allowOne, "::ffff:10.1.2.3", true},
		{"private outside prefix", allowOne, "10.1.3.1", false},
		{"ULA by prefix", allowOne, "fd12::1", true},
		{"metadata in ULA prefix still refused", &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("fd00::/8")}}, "fd00:ec2::254", false},
		{"metadata in CGNAT still refused", private, "100.100.100.200", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.guard.Check(netip.MustParseAddr(tt.ip))
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrForbidden)
			var fe *ForbiddenError
			require.True(t, errors.As(err, &fe))
			require.NotEmpty(t, fe.Reason)
			require.True(t, fe.IP.IsValid())
		})
	}
}

func TestGuardControl(t *testing.T) {
	t.Parallel()

	g := &Guard{AllowLoopback: true}
	tests := []struct {
		address string
		ok      bool
	}{
		{"127.0.0.1:8080", true},
		{"[::1]:443", true},
		{"93.184.216.34:443", true},
		{"[::ffff:169.254.169.254]:80", false},
		{"[fe80::1%eth0]:80", false},
		{"10.0.0.1:80", false},
		// Anything unparseable is refused: the guard fails closed.
		{"example.com:80", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			t.Parallel()
			err := g.Control("tcp", tt.address, nil)
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrForbidden)
			}
		})
	}
}

func TestForbiddenError(t *testing.T) {
	t.Parallel()

	err := (&Guard{}).Check(netip.MustParseAddr("169.254.169.254"))
	require.EqualError(t, err, "destination 169.254.169.254 forbidden: cloud metadata address")
	require.ErrorIs(t, err, ErrForbidden)
}
