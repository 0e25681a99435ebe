package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/push"
)

// TestPushLimitFlags: the Web Push caps (issue 20, item 5) default to
// push.DefaultLimits, are set by flag or HERALD_ environment variable, and
// refuse values that mean nothing. Not parallel: it sets the environment.
func TestPushLimitFlags(t *testing.T) {
	c, err := loadConfig(t, nil)
	require.NoError(t, err)
	require.Equal(t, push.DefaultLimits, c.PushLimits)

	t.Setenv("HERALD_PUSH_SEND_RATE", "2.5")
	t.Setenv("HERALD_PUSH_MAX_CHANNELS", "0")
	t.Setenv("HERALD_PUSH_REGISTER_NODE_RATE", "40")
	c, err = loadConfig(t, []string{"--push-max-messages-per-uaid", "10", "--push-max-messages-per-channel", "5",
		"--push-register-rate", "0", "--push-register-burst", "7", "--push-send-burst", "3",
		"--push-register-ip-rate", "0.5", "--push-register-ip-burst", "20"})
	require.NoError(t, err)
	require.Equal(t, push.Limits{MaxMessagesPerUAID: 10, MaxMessagesPerChannel: 5, MaxChannels: 0,
		RegisterRate: 0, RegisterBurst: 7, RegisterIPRate: 0.5, RegisterIPBurst: 20, RegisterNodeRate: 40,
		SendRate: 2.5, SendBurst: 3}, c.PushLimits)

	for args, want := range map[string]string{
		"--push-max-channels=-1":          "--push-max-channels must not be negative",
		"--push-max-messages-per-uaid=-1": "--push-max-messages-per-uaid must not be negative",
		"--push-send-rate=-1":             "--push-send-rate must be a rate per second",
		"--push-register-rate=NaN":        "--push-register-rate must be a rate per second",
		"--push-send-burst=0":             "--push-send-burst must be at least 1",
		"--push-register-ip-rate=-1":      "--push-register-ip-rate must be a rate per second",
		"--push-register-node-rate=+Inf":  "--push-register-node-rate must be a rate per second",
		"--push-register-ip-burst=0":      "--push-register-ip-burst must be at least 1",
	} {
		_, err := loadConfig(t, []string{args})
		require.ErrorContains(t, err, want, args)
	}
}
