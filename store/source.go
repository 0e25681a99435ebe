package store

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhq/herald"
)

// SourceStore is the part of Store that keeps broker sources (operator-
// owned, like connections), what each node reports of them, their recent
// rejects, and the lease that makes one node the consumer of an ordered
// source. Sources are stored with their mapping as JSON; a source names a
// connection, so ConnectionDelete refuses (ConnectionInUseError with
// SourceName set) a connection a source uses.
type SourceStore interface {
	// SourceCreate stores a new source (the caller fills every field,
	// CreatedAt and UpdatedAt included). herald.ErrConflict when the name
	// exists; ErrSourceConnectionMissing when its connection does not
	// exist when the transaction runs.
	SourceCreate(ctx context.Context, params *SourceCreateParams) (*herald.Source, error)
	// SourceGet returns one source or ErrNotFound.
	SourceGet(ctx context.Context, name string) (*herald.Source, error)
	// SourceList pages through sources in name order (Limit 0: all).
	SourceList(ctx context.Context, params *SourceListParams) (*SourceListResult, error)
	// SourceUpdate replaces every mutable field of the source named
	// params.Source.Name (the caller merged it) and sets UpdatedAt.
	// ErrNotFound if absent; ErrSourceConnectionMissing as for create.
	SourceUpdate(ctx context.Context, params *SourceUpdateParams) (*herald.Source, error)
	// SourceDelete removes a source with its node status rows, rejects and
	// lease. ErrNotFound if absent.
	SourceDelete(ctx context.Context, name string) error
	// SourcesVersion changes whenever a source is created, updated or
	// deleted: nodes poll it to restart their consumers.
	SourcesVersion(ctx context.Context) (int64, error)

	// SourceReport records one node's view of a source: it adds the
	// counter deltas to the node's row (created on first report), sets its
	// state, last error, pending and UpdatedAt = Now, and appends the
	// rejects, keeping only the newest herald.SourceRecentRejects per
	// source. A report for a source that no longer exists does nothing.
	SourceReport(ctx context.Context, params *SourceReportParams) error
	// SourceStatusGet returns the node rows and recent rejects (newest
	// first) of a source, combined by herald.CombineSourceStatus at Now.
	// ErrNotFound if the source does not exist.
	SourceStatusGet(ctx context.Context, params *SourceStatusGetParams) (*herald.SourceStatus, error)

	// SourceLeaseAcquire makes Node the holder of the source's lease until
	// Now+TTL when nobody holds it, the lease expired, or Node already
	// holds it (renewal), and reports whether Node holds it after the
	// call. Two nodes racing for a free lease: exactly one gets it. Nobody
	// holds the lease of a source that does not exist (false, no error).
	SourceLeaseAcquire(ctx context.Context, params *SourceLeaseParams) (bool, error)
	// SourceLeaseRelease ends Node's lease of the source if it holds it.
	SourceLeaseRelease(ctx context.Context, params *SourceLeaseParams) error
}

// SourceCreateParams are the inputs of SourceCreate.
type SourceCreateParams struct {
	Source *herald.Source
}

// SourceListParams page through sources.
type SourceListParams struct {
	// After is the last name of the previous page ("" for the first).
	After string
	// Limit caps the page (0: every source).
	Limit int
}

// SourceListResult is one page.
type SourceListResult struct {
	Sources []*herald.Source
	// More is true when a further page exists; the cursor is the last name.
	More bool
}

// SourceUpdateParams carry the merged source; Source.Name selects it.
type SourceUpdateParams struct {
	Source *herald.Source
}

// SourceReportParams are one node's report on one source.
type SourceReportParams struct {
	Source string
	Node   string
	State  string
	// Consumed, Duplicates and Rejected are added to the node's counters.
	Consumed, Duplicates, Rejected int64
	// LastError replaces the node's last error ("" clears it).
	LastError string
	// Pending replaces the node's pending figure (nil: unknown).
	Pending *int64
	// Rejects are appended (their Node is set to Node).
	Rejects []herald.SourceReject
	Now     time.Time
}

// SourceStatusGetParams are the inputs of SourceStatusGet.
type SourceStatusGetParams struct {
	Name string
	Now  time.Time
}

// SourceLeaseParams name a source's lease and its holder.
type SourceLeaseParams struct {
	Source string
	Node   string
	TTL    time.Duration
	Now    time.Time
}

// ErrSourceConnectionMissing is SourceCreate's and SourceUpdate's answer
// for a source naming a connection that does not exist when the
// transaction runs.
func ErrSourceConnectionMissing(name string) error {
	return herald.FieldErrorf(herald.CodeInvalidField, "connection",
		"connection %q does not exist", name)
}

// SourceInUseMessage is the message of a ConnectionInUseError for a
// connection a source uses.
func SourceInUseMessage(conn, source string) string {
	return fmt.Sprintf("connection %q is used by source %s; delete that source or change its connection first", conn, source)
}
