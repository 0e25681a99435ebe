package push

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// clientFrame builds a masked client frame.
func clientFrame(fin bool, op byte, payload []byte) []byte {
	b := []byte{op, maskBit}
	if fin {
		b[0] |= finBit
	}
	switch l := len(payload); {
	case l < 126:
		b[1] |= byte(l)
	case l <= 0xffff:
		b[1] |= 126
		b = binary.BigEndian.AppendUint16(b, uint16(l))
	default:
		b[1] |= 127
		b = binary.BigEndian.AppendUint64(b, uint64(l))
	}
	key := []byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, key...)
	start := len(b)
	b = append(b, payload...)
	unmask(key, b[start:])
	return b
}

// readAll feeds data to a fresh reader in chunks of the given sizes (the
// rest in one) and returns what it emitted, one line per frame, and the
// error, if any.
func readAll(data []byte, chunks []int) ([]string, error) {
	var r frameReader
	var out []string
	emit := func(op byte, p []byte) bool {
		out = append(out, fmt.Sprintf("%d:%q", op, p))
		return true
	}
	for _, n := range chunks {
		n = min(n, len(data))
		// Each chunk is a fresh buffer, as a pooled read buffer is reused.
		chunk := bytes.Clone(data[:n])
		data = data[n:]
		if err := r.feed(chunk, maxFrameBytes, emit); err != nil {
			return out, err
		}
	}
	if err := r.feed(bytes.Clone(data), maxFrameBytes, emit); err != nil {
		return out, err
	}
	if r.pending() {
		out = append(out, "incomplete")
	}
	return out, nil
}

func TestFrameReader(t *testing.T) {
	t.Parallel()
	text := clientFrame(true, opText, []byte(`{"messageType":"hello"}`))
	big := bytes.Repeat([]byte("a"), 300)
	stream := bytes.Join([][]byte{
		text,
		clientFrame(true, opPing, []byte("p")),
		clientFrame(false, opText, []byte("frag")),
		clientFrame(true, opPong, nil), // control frames may come between fragments
		clientFrame(false, opContinuation, []byte("ment")),
		clientFrame(true, opContinuation, big),
		clientFrame(true, opClose, closePayload(1000, "bye")),
	}, nil)
	want := []string{
		`1:"{\"messageType\":\"hello\"}"`, `9:"p"`, `10:""`,
		fmt.Sprintf("1:%q", "fragment"+string(big)), `8:"\x03\xe8bye"`,
	}
	got, err := readAll(stream, nil)
	require.NoError(t, err)
	require.Equal(t, want, got)
	for split := range len(stream) {
		got, err := readAll(stream, []int{split})
		require.NoError(t, err)
		require.Equal(t, want, got, "split at %d", split)
	}
	ones := make([]int, len(stream))
	for i := range ones {
		ones[i] = 1
	}
	got, err = readAll(stream, ones)
	require.NoError(t, err)
	require.Equal(t, want, got, "one byte at a time")

	// Between frames the reader holds nothing.
	var r frameReader
	require.NoError(t, r.feed(text[:3], maxFrameBytes, func(byte, []byte) bool { return true }))
	require.True(t, r.pending())
	require.NoError(t, r.feed(text[3:], maxFrameBytes, func(byte, []byte) bool { return true }))
	require.False(t, r.pending())
	require.Nil(t, r.partial)
}

func TestFrameReaderRefuses(t *testing.T) {
	t.Parallel()
	unmasked := clientFrame(true, opText, []byte("x"))
	unmasked[1] &^= maskBit
	for _, tc := range []struct {
		name  string
		data  []byte
		code  int
		emits int
	}{
		{"unmasked", unmasked, closeProtocol, 0},
		{"reserved bit", append([]byte{0xc1}, clientFrame(true, opText, nil)[1:]...), closeProtocol, 0},
		{"bad opcode", clientFrame(true, 0x3, nil), closeProtocol, 0},
		{"long control", clientFrame(true, opPing, make([]byte, 126)), closeProtocol, 0},
		{"fragmented control", clientFrame(false, opPing, nil), closeProtocol, 0},
		{"continuation first", clientFrame(true, opContinuation, nil), closeProtocol, 0},
		{"data before fin", append(clientFrame(false, opText, nil), clientFrame(true, opText, nil)...), closeProtocol, 0},
		{"bad close code", clientFrame(true, opClose, closePayload(1004, "")), closeProtocol, 0},
		{"close reason not UTF-8", clientFrame(true, opClose, closePayload(1000, "\xff")), closeProtocol, 0},
		{"over the limit", clientFrame(true, opText, make([]byte, maxFrameBytes+1)), closeTooBig, 0},
		{"over the limit in fragments", append(clientFrame(false, opText, make([]byte, maxFrameBytes)),
			clientFrame(true, opContinuation, []byte("x"))...), closeTooBig, 0},
		{"after a good frame", append(clientFrame(true, opText, []byte("{}")), unmasked...), closeProtocol, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(tc.data, nil)
			var fe *frameError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Equal(t, tc.code, fe.Code)
			require.Len(t, got, tc.emits)
		})
	}
	// The limit is refused from the header: the payload is never awaited.
	hdr := clientFrame(true, opText, make([]byte, maxFrameBytes+1))[:14]
	_, err := readAll(hdr, nil)
	require.Error(t, err)
}

// FuzzFrameReaderPartialReads: a stream read in pieces, as a socket hands
// it over, gives the same messages and the same verdict as read whole,
// wherever it is cut; nothing panics; the reader holds nothing once a
// stream ends on a frame boundary. The seeds in testdata are regression
// cases.
func FuzzFrameReaderPartialReads(f *testing.F) {
	f.Add(clientFrame(true, opText, []byte(`{"messageType":"hello"}`)), []byte{1, 2, 3})
	f.Add(append(clientFrame(false, opText, []byte("ab")), clientFrame(true, opContinuation, []byte("cd"))...), []byte{7})
	f.Add(clientFrame(true, opText, bytes.Repeat([]byte("x"), 200)), []byte{2, 1, 200})
	f.Add(clientFrame(true, opClose, closePayload(1001, "")), []byte{1})
	f.Add(clientFrame(true, opText, make([]byte, maxFrameBytes+1))[:20], []byte{4})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		whole, werr := readAll(data, nil)
		chunks := make([]int, len(cuts))
		for i, c := range cuts {
			chunks[i] = int(c)
		}
		parts, perr := readAll(data, chunks)
		if (werr == nil) != (perr == nil) {
			t.Fatalf("whole: %v, in parts: %v", werr, perr)
		}
		if werr != nil {
			var a, b *frameError
			if !errors.As(werr, &a) || !errors.As(perr, &b) || a.Code != b.Code {
				t.Fatalf("whole: %v, in parts: %v", werr, perr)
			}
			if a.Code != closeProtocol && a.Code != closeTooBig {
				t.Fatalf("close code %d", a.Code)
			}
		}
		require.Equal(t, whole, parts)
	})
}
