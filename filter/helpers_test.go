package filter

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// testData is a DSS-like "bundle indexed" event payload exercising every
// JSON type, arrays of objects, nested arrays and keys with dots.
const testData = `{
  "bundle": {"uuid": "3f9c2a1e-8d1b-4c7e-9f00-1a2b3c4d5e6f", "version": "2018-03-01T120000.000000Z"},
  "files": [
    {"name": "sample.json", "content_type": "application/json", "size": 1024, "indexed": true},
    {"name": "reads_R1.fastq.gz", "content_type": "application/gzip", "size": 9007199254740993, "indexed": false}
  ],
  "sample": {"donor": {"species": "Homo sapiens", "age": 42.5}, "organ": "Brain"},
  "tags": ["blue", "green"],
  "size": 15,
  "ratio": 0.5,
  "count_str": "15",
  "active": true,
  "nothing": null,
  "empty": "",
  "empty_list": [],
  "empty_obj": {},
  "nulls": [null, null],
  "a.b": "dotted",
  "matrix": [[1, 2], [3, 4]],
  "created": "2024-05-01T12:00:00Z",
  "project": {
    "short_name": "human-brain-atlas",
    "title": "Single-cell transcriptome of the adult human cortex",
    "contributors": [
      {"name": "A. Researcher", "email": "a.researcher@example.org", "institution": "Example Institute"},
      {"name": "B. Scientist", "email": "b.scientist@example.org", "institution": "Sample University"}
    ],
    "funders": ["Example Foundation", "Public Research Council"]
  }
}`

func testEvent(t testing.TB) *herald.Event {
	t.Helper()
	v := int64(7)
	return &herald.Event{
		ID:        "evt_1",
		Type:      "bundle.indexed",
		Key:       "bundle-1",
		Version:   &v,
		Data:      json.RawMessage(testData),
		CreatedAt: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
	}
}

func testInput(t testing.TB) *Input {
	t.Helper()
	return NewInput(testEvent(t))
}

// requireFilterError checks the error contract of Compile.
func requireFilterError(t *testing.T, err error, field, msgContains string) {
	t.Helper()
	require.Error(t, err)
	var herr *herald.Error
	require.ErrorAs(t, err, &herr)
	require.Equal(t, herald.CodeInvalidFilter, herr.Code)
	require.Equal(t, field, herr.Field)
	require.Contains(t, herr.Message, msgContains)
}
