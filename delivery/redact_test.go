package delivery

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://hooks.example/p", "https://hooks.example/p"},
		{"https://user:pass@hooks.example:8443/a/b?token=x&y=2#frag", "https://hooks.example:8443/a/b"},
		{"https://user@hooks.example/?", "https://hooks.example/"},
		{"http://[::1]:9000/h?k=v", "http://[::1]:9000/h"},
		{"https://hooks.example/a%2Fb?x", "https://hooks.example/a%2Fb"},
		{"://not a url", ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, redactURL(tt.in), tt.in)
	}
}
