package webpushdest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNodeHTTPECE: the npm http_ece package, what browsers' push code is
// checked against in the Node ecosystem, decrypts what herald sends:
// e2e/push-node/decrypt.js reads the bodies the test push service
// captured. .ci/run installs the packages (npm ci); elsewhere the test
// skips, visibly, until `npm ci` ran in e2e/push-node.
func TestNodeHTTPECE(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("../../e2e/push-node")
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "http_ece")); err != nil || statErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or e2e/push-node/node_modules is missing (CI=true: .ci/run runs npm ci there): %v %v", err, statErr)
		}
		t.Skip("SKIP: run `npm ci` in e2e/push-node (and have Node.js) to check herald's messages with http_ece")
	}

	vapid := newVAPIDKey(t)
	ps := newPushService(t, vapid)
	p := newTestPublisher(t, vapid, true)
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	payloads := [][]byte{
		[]byte(`{"type":"order.paid","data":{"text":"herald ✓"}}`),
		{},
		allBytes,
		bytes.Repeat([]byte("z"), MaxPlaintext),
	}
	for _, pl := range payloads {
		res := p.Send(t.Context(), request(ps.destination(), pl))
		require.True(t, res.Success, "%+v", res)
	}
	got := ps.received()
	require.Len(t, got, len(payloads))
	in := map[string]any{
		"privateKey": base64.RawURLEncoding.EncodeToString(ps.ua.priv.Bytes()),
		"authSecret": base64.RawURLEncoding.EncodeToString(ps.ua.auth),
	}
	var bodies []string
	for _, r := range got {
		bodies = append(bodies, base64.RawURLEncoding.EncodeToString(r.body))
	}
	in["bodies"] = bodies
	stdin, err := json.Marshal(in)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "decrypt.js")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s", stderr.String())
	var res struct {
		Plaintexts []string `json:"plaintexts"`
	}
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	require.Len(t, res.Plaintexts, len(payloads))
	for i, pl := range payloads {
		plain, err := base64.RawURLEncoding.DecodeString(res.Plaintexts[i])
		require.NoError(t, err)
		require.Equal(t, pl, plain, "payload %d", i)
	}
}
