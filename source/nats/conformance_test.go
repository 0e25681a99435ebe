package natssrc

import (
	"testing"

	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/source/sourcetest"
)

// TestConformance runs the source conformance suite on the machine's
// NATS server (its BrokerRestart case restarts the server).
func TestConformance(t *testing.T) {
	sourcetest.Run(t, newHarness(t), Dial, httpapi.DecodeEvent)
}
