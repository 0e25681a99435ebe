package mqttsrc_test

import (
	"testing"

	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/source/sourcetest"
)

// TestConformance runs the suite every source type runs against its real
// broker (sourcetest.Run) on Mosquitto. Not parallel: its restart case
// stops the broker the other tests of this package use.
func TestConformance(t *testing.T) {
	h := newHarness(t)
	sourcetest.Run(t, h, h.Dial, httpapi.DecodeEvent)
}
