package redissrc

import (
	"context"
	"time"

	"github.com/heraldhq/herald/source"
)

// DialClaiming dials with a short claim idle time and interval, so a test
// sees a dead consumer's entries taken over without waiting a minute.
func DialClaiming(ctx context.Context, p source.DialParams, minIdle, every time.Duration) (source.Consumer, error) {
	c, err := dial(ctx, p, minIdle, every)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ReaderID is the CLIENT ID of c's blocking reader connection.
func ReaderID(c source.Consumer) int64 { return c.(*consumer).readerID }

// ReadBlock is the longest one blocking read waits.
const ReadBlock = readBlock
