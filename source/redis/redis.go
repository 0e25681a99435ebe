package redissrc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/redisconn"
	"github.com/heraldhq/herald/source"
)

// Client limits and timing.
const (
	dialTimeout = 5 * time.Second
	// ioTimeout bounds a reply to any command but the blocking read
	// (go-redis extends that one's read deadline by its BLOCK time).
	ioTimeout = 10 * time.Second
	// readBlock is the longest one XREADGROUP waits for new entries:
	// Receive loops over such reads until an entry arrives or its context
	// ends. A cancelled context also unblocks the read at once (CLIENT
	// UNBLOCK); the bound is what is left when Redis refuses that.
	readBlock = 5 * time.Second
	// claimMinIdle is how long an entry stays pending on another consumer
	// (another node, or an earlier run of a node under another id) before
	// this one takes it over with XAUTOCLAIM. It must exceed the longest
	// a live node holds a batch (two commits, its own and the one ahead
	// of it, plus a settle, bounded at seconds), or live nodes would steal each other's entries: they
	// would be stored once anyway (a duplicate), but counted twice.
	claimMinIdle = 60 * time.Second
	// claimEvery is how often a consumer looks for such entries.
	claimEvery = 15 * time.Second
	// rejectedMaxLen caps <stream>:rejected (approximately, MAXLEN ~).
	rejectedMaxLen = 100_000
	// poolSize: the blocking reader's own connection, one for settling
	// and reporting, one to unblock the reader.
	poolSize = 3
)

// rejectedSuffix names the stream rejected entries are copied to.
const rejectedSuffix = ":rejected"

// consumer is one source's consumer group member on one client.
type consumer struct {
	rdb *redis.Client
	// reader is the connection the blocking XREADGROUP runs on; readerID
	// its CLIENT ID, to unblock it when Receive's context ends (0:
	// unknown, the read then ends at readBlock).
	reader   *redis.Conn
	readerID int64

	stream, group, name string
	prefetch            int

	// history is the cursor through this consumer's own pending entries
	// (XREADGROUP from an id); "" once they are all re-read.
	history string
	// claimCursor is XAUTOCLAIM's cursor ("0-0": start a new scan at
	// nextClaim).
	claimCursor string
	nextClaim   time.Time
	// minIdle and claimInterval are claimMinIdle and claimEvery (tests
	// shorten them).
	minIdle, claimInterval time.Duration
}

var _ source.Dialer = Dial

// Dial opens a consumer of p.Source's stream and group as the consumer
// named p.Node, creating the group (and the stream) when missing.
func Dial(ctx context.Context, p source.DialParams) (source.Consumer, error) {
	c, err := dial(ctx, p, claimMinIdle, claimEvery)
	if err != nil {
		return nil, err // not a nil *consumer in a non-nil interface
	}
	return c, nil
}

func dial(ctx context.Context, p source.DialParams, minIdle, claimInterval time.Duration) (*consumer, error) {
	src := p.Source
	if err := herald.CheckRedisStream(src.Stream); err != nil {
		return nil, fmt.Errorf("redis stream %w", err)
	}
	group := src.Group
	if group == "" {
		group = herald.DefaultSourceConsumer
	}
	name := p.Node
	if name == "" {
		return nil, errors.New("redis consumer: the node id (consumer name) is empty")
	}
	opt, err := options(p.Connection)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opt)
	c := &consumer{rdb: rdb, stream: src.Stream, group: group, name: name, prefetch: max(p.Prefetch, 1),
		history: "0", claimCursor: "0-0", minIdle: minIdle, claimInterval: claimInterval}
	if err := c.setup(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// setup creates the group when missing and opens the reader connection.
func (c *consumer) setup(ctx context.Context) error {
	err := c.rdb.XGroupCreateMkStream(ctx, c.stream, c.group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("creating redis group %q on stream %q: %w", c.group, c.stream, err)
	}
	c.reader = c.rdb.Conn()
	id, err := c.reader.ClientID(ctx).Result()
	switch {
	case err == nil:
		c.readerID = id
	case isServerError(err):
		// An ACL without CLIENT: reads end at readBlock instead.
	default:
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Close closes the client. Entries received and not settled stay pending
// on this consumer (see the package doc).
func (c *consumer) Close() error {
	var err error
	if c.reader != nil {
		err = c.reader.Close()
	}
	return errors.Join(err, c.rdb.Close())
}

// options builds the client options of conn (internal/redisconn) with
// this consumer's pool.
func options(conn *herald.Connection) (*redis.Options, error) {
	opt, err := redisconn.Options(conn, dialTimeout, ioTimeout)
	if err != nil {
		return nil, err
	}
	opt.PoolSize = poolSize
	return opt, nil
}

// isServerError reports an error reply of the server (NOGROUP, NOPERM,
// WRONGTYPE...), as opposed to a connection failure.
func isServerError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && !errors.Is(err, redis.Nil)
}
