// Package redisconn builds go-redis client options from a herald
// connection, for the Redis destination (destination/redis) and the Redis
// source (source/redis): one URL, TLS and protocol rule for both.
package redisconn

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
)

// Options parses conn's URL into client options with the given dial and
// I/O timeouts (context deadlines apply too), and settings both packages
// need:
//   - no command retries (MaxRetries -1): a retried XADD whose first try
//     was applied appends a duplicate, a retried XREADGROUP whose reply
//     was lost leaves entries pending unseen; both callers retry at their
//     own level instead;
//   - RESP2, no CLIENT SETINFO, no maintenance notifications: plain
//     commands that every Redis with streams answers;
//   - the connection's TLS settings on top of a rediss:// URL's.
//
// An error never quotes the URL (it may hold a password).
func Options(conn *herald.Connection, dialTimeout, ioTimeout time.Duration) (*redis.Options, error) {
	opt, err := redis.ParseURL(conn.URL)
	if err != nil {
		// net/url's errors quote the whole URL, password included.
		return nil, fmt.Errorf("bad redis URL: %w", destination.CleanURLError(err))
	}
	opt.DialTimeout = dialTimeout
	opt.DialerRetries = 1
	opt.ReadTimeout = ioTimeout
	opt.WriteTimeout = ioTimeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.Protocol = 2
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if conn.TLS != nil {
		if opt.TLSConfig == nil {
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if err := destination.ApplyTLS(opt.TLSConfig, conn.TLS); err != nil {
			return nil, err
		}
		if opt.TLSConfig.ServerName == "" {
			opt.TLSConfig.ServerName, _, _ = net.SplitHostPort(opt.Addr)
		}
	}
	return opt, nil
}
