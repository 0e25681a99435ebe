package store

import (
	"encoding/json"
	"fmt"

	"github.com/heraldhq/herald"
)

// How both backends keep sources (migration 017): the broker-specific
// fields of a herald.Source (queue, stream, durable, subject, group, topic,
// prefetch) are one JSON document in the config column, so a field for a
// new broker needs no migration; the mapping is JSON too (NULL when the
// source has none). Name, type, connection, tenant, ordered and enabled
// are columns of their own: the first three are looked up (the connection
// by ConnectionDelete's in-use check), the rest are plain flags.

// sourceConfig is the config column's document.
type sourceConfig struct {
	Queue    string `json:"queue,omitempty"`
	Stream   string `json:"stream,omitempty"`
	Durable  string `json:"durable,omitempty"`
	Subject  string `json:"subject,omitempty"`
	Group    string `json:"group,omitempty"`
	Topic    string `json:"topic,omitempty"`
	Prefetch int    `json:"prefetch,omitempty"`
}

// SourceColumns returns the config and mapping column values of src
// (mapping nil when src has none).
func SourceColumns(src *herald.Source) (config string, mapping *string, err error) {
	b, err := json.Marshal(sourceConfig{
		Queue: src.Queue, Stream: src.Stream, Durable: src.Durable, Subject: src.Subject,
		Group: src.Group, Topic: src.Topic, Prefetch: src.Prefetch,
	})
	if err != nil {
		return "", nil, fmt.Errorf("config of source %s: %w", src.Name, err)
	}
	if src.Mapping != nil {
		m, err := json.Marshal(src.Mapping)
		if err != nil {
			return "", nil, fmt.Errorf("mapping of source %s: %w", src.Name, err)
		}
		s := string(m)
		mapping = &s
	}
	return string(b), mapping, nil
}

// SourceFill sets src's broker fields and mapping from the config and
// mapping columns.
func SourceFill(src *herald.Source, config string, mapping *string) error {
	var c sourceConfig
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return fmt.Errorf("source %s config: %w", src.Name, err)
	}
	src.Queue, src.Stream, src.Durable, src.Subject = c.Queue, c.Stream, c.Durable, c.Subject
	src.Group, src.Topic, src.Prefetch = c.Group, c.Topic, c.Prefetch
	src.Mapping = nil
	if mapping != nil {
		src.Mapping = &herald.SourceMapping{}
		if err := json.Unmarshal([]byte(*mapping), src.Mapping); err != nil {
			return fmt.Errorf("source %s mapping: %w", src.Name, err)
		}
	}
	return nil
}

// SourceRejectsTrimOffset is the position, newest first from 0, of the
// oldest reject SourceReport keeps of a source: in the report's
// transaction each backend deletes the source's rejects with a smaller id
// than the one at this offset (nothing while the source has fewer), so
// herald.SourceRecentRejects remain. Ids grow with every insert and are
// never reused, so id order is arrival order.
const SourceRejectsTrimOffset = herald.SourceRecentRejects - 1

// SourceReportRejects are the rejects of a report to store, oldest first:
// its last herald.SourceRecentRejects (older ones would be trimmed in the
// same transaction anyway), each with Node set to the reporting node.
func SourceReportRejects(params *SourceReportParams) []herald.SourceReject {
	rs := params.Rejects
	if len(rs) > herald.SourceRecentRejects {
		rs = rs[len(rs)-herald.SourceRecentRejects:]
	}
	out := make([]herald.SourceReject, len(rs))
	for i, r := range rs {
		r.Node = params.Node
		out[i] = r
	}
	return out
}
