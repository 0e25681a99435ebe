package destination_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/webhook"
)

// talker answers every send with what a hostile broker might say.
type talker struct{ res webhook.Result }

func (p talker) Send(context.Context, *webhook.Request) webhook.Result { return p.res }
func (talker) Close()                                                  {}

// Whatever a publisher quotes from a broker, the Router hands the engine
// text that can be stored: valid UTF-8, no NUL, bounded.
func TestRouterCleansResultText(t *testing.T) {
	r := destination.NewRouter(talker{})
	r.Register(herald.DestinationRedis, talker{webhook.Result{
		Class:   herald.ErrorBroker,
		Message: "ERR \x00bad\xff\xfe" + strings.Repeat("x", 1000),
		Excerpt: "line\x00\xc3" + strings.Repeat("y", 5000),
	}})
	res := r.Send(context.Background(), &webhook.Request{Destination: herald.Destination{Type: herald.DestinationRedis}})
	require.Equal(t, herald.ErrorBroker, res.Class)
	for _, s := range []string{res.Message, res.Excerpt} {
		require.True(t, utf8.ValidString(s), "%q", s)
		require.NotContains(t, s, "\x00")
	}
	require.LessOrEqual(t, len(res.Message), destination.MaxMessageLen)
	require.LessOrEqual(t, len(res.Excerpt), herald.ResponseExcerptLimit)
	require.True(t, strings.HasPrefix(res.Message, "ERR "), res.Message)
}
