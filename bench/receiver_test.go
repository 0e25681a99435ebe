package bench

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The client publishes eventInput; the body it sends is EventBody's, byte
// for byte, and the receiver reads the stamp back.
func TestEventInputIsEventBody(t *testing.T) {
	t.Parallel()
	stamp := time.Unix(1700000000, 123456789)
	pad := Pad(1024)
	got, err := json.Marshal(eventInput("bench.x", stamp, pad))
	require.NoError(t, err)
	require.Equal(t, string(EventBody("bench.x", stamp, pad)), string(got))
	ns, ok := stampOf(got)
	require.True(t, ok)
	require.Equal(t, stamp.UnixNano(), ns)
	require.InDelta(t, 1024, len(eventData(stamp, pad)), 1)
}

func TestCheckLoopback(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://127.0.0.1:8080", "https://localhost", "http://[::1]:1"} {
		require.NoError(t, CheckLoopback(u), u)
	}
	for _, u := range []string{"http://192.0.2.1:8080", "http://example.com", "ftp://127.0.0.1", "://"} {
		require.Error(t, CheckLoopback(u), u)
	}
}
