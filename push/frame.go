package push

// This file holds the WebSocket framing of a session (RFC 6455 §5): an
// incremental reader fed whatever bytes the socket had, and the writer of
// server frames. The reader keeps nothing between frames: an incomplete
// frame is copied into a buffer of its own size only until its last byte
// arrives, so an idle session holds no read buffer (ADR 0027).
//
// What it accepts and refuses is what gorilla/websocket, used before,
// accepted and refused as a server without compression: masked client
// frames only, no reserved bits, control frames final and at most 125
// bytes, continuation frames only inside a fragmented message; a message
// over maxFrameBytes in all is refused with 1009 as soon as its header says
// so; a close frame's code must be one a peer may send and its reason
// UTF-8.

import (
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Opcodes (RFC 6455 §5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
)

const (
	finBit  = 0x80
	maskBit = 0x80
	// maxControlPayload is the largest control frame payload (§5.5).
	maxControlPayload = 125
	// closeNoStatus is the code a close frame without a payload stands
	// for (§7.1.5); it is never sent.
	closeNoStatus = 1005
	// closeTooBig is the close code of a message over maxFrameBytes.
	closeTooBig = 1009
)

// errFrameTooBig is what the reader returns for a message over its limit,
// inside a *frameError with code 1009.
var errFrameTooBig = errors.New("push: client message over the frame limit")

// frameReader turns the bytes of one socket into client messages and
// control frames. Its zero value is ready; it holds memory only while a
// frame or a fragmented message is incomplete.
type frameReader struct {
	// partial is the start of an incomplete frame, with room for the
	// whole frame once its header is known; nil between frames.
	partial []byte
	// msg is the payload of a fragmented message so far and msgOp its
	// opcode (0: no message in progress).
	msg   []byte
	msgOp byte
}

// pending reports whether a frame or a message is incomplete.
func (r *frameReader) pending() bool { return len(r.partial) > 0 || r.msgOp != 0 }

// reset drops whatever is incomplete.
func (r *frameReader) reset() { *r = frameReader{} }

// feed reads the frames in data (after what was left incomplete) and calls
// emit for each data message (opText or opBinary, the whole message,
// defragmented) and each control frame (opClose, opPing, opPong with its
// payload). A payload is valid only during its emit call. When emit
// returns false, feed stops after that frame and keeps the bytes not yet
// read for the next call (feed(nil) resumes). An error is a *frameError: the frames are
// invalid and the socket must close with its code; nothing more may be
// fed.
func (r *frameReader) feed(data []byte, limit int, emit func(op byte, payload []byte) bool) error {
	buf := data
	if len(r.partial) > 0 {
		buf = append(r.partial, data...)
		r.partial = nil
	}
	for len(buf) > 0 {
		n, need, more, err := r.next(buf, limit, emit)
		if err != nil {
			r.reset()
			return err
		}
		if n == 0 {
			r.keep(buf, need)
			return nil
		}
		buf = buf[n:]
		if !more {
			if len(buf) > 0 {
				r.keep(buf, 0)
			}
			return nil
		}
	}
	return nil
}

// keep copies rest, the start of a frame not read yet, into a buffer of
// its own with room for need bytes in all (0: unknown yet).
func (r *frameReader) keep(rest []byte, need int) {
	p := make([]byte, len(rest), max(len(rest), need, 2))
	copy(p, rest)
	r.partial = p
}

// next reads the frame at the start of b. It returns the bytes it used,
// 0 when b does not hold the whole frame yet (need is then the frame's
// length in all if the header is complete, else 0), and whether emit
// asked for more.
func (r *frameReader) next(b []byte, limit int, emit func(byte, []byte) bool) (n, need int, more bool, err error) {
	if len(b) < 2 {
		return 0, 0, true, nil
	}
	fin := b[0]&finBit != 0
	op := b[0] & 0x0f
	masked := b[1]&maskBit != 0
	var problems []string
	for i, name := range []string{"RSV1 set", "RSV2 set", "RSV3 set"} {
		if b[0]&(0x40>>i) != 0 {
			problems = append(problems, name)
		}
	}
	size := uint64(b[1] & 0x7f)
	switch op {
	case opClose, opPing, opPong:
		if size > maxControlPayload {
			problems = append(problems, "len > 125 for control")
		}
		if !fin {
			problems = append(problems, "FIN not set on control")
		}
	case opText, opBinary:
		if r.msgOp != 0 {
			problems = append(problems, "data before FIN")
		}
	case opContinuation:
		if r.msgOp == 0 {
			problems = append(problems, "continuation after FIN")
		}
	default:
		problems = append(problems, "bad opcode "+strconv.Itoa(int(op)))
	}
	if !masked {
		problems = append(problems, "bad MASK")
	}
	if len(problems) > 0 {
		return 0, 0, false, protocolFrameError(strings.Join(problems, ", "))
	}
	hdr := 2
	switch size {
	case 126:
		if len(b) < 4 {
			return 0, 0, true, nil
		}
		size = uint64(binary.BigEndian.Uint16(b[2:]))
		hdr = 4
	case 127:
		if len(b) < 10 {
			return 0, 0, true, nil
		}
		size = binary.BigEndian.Uint64(b[2:])
		hdr = 10
	}
	hdr += 4 // the mask key
	if len(b) < hdr {
		return 0, 0, true, nil
	}
	if op < opClose && (size > uint64(limit) || uint64(len(r.msg))+size > uint64(limit)) {
		return 0, 0, false, &frameError{Code: closeTooBig, Err: errFrameTooBig}
	}
	total := hdr + int(size)
	if len(b) < total {
		return 0, total, true, nil
	}
	payload := b[hdr:total]
	unmask(b[hdr-4:hdr], payload)
	switch op {
	case opText, opBinary:
		if !fin {
			r.msgOp = op
			r.msg = append(make([]byte, 0, len(payload)), payload...)
			return total, 0, true, nil
		}
		return total, 0, emit(op, payload), nil
	case opContinuation:
		if !fin {
			r.msg = append(r.msg, payload...)
			return total, 0, true, nil
		}
		msg, op := append(r.msg, payload...), r.msgOp
		r.msg, r.msgOp = nil, 0
		return total, 0, emit(op, msg), nil
	case opClose:
		if len(payload) >= 2 {
			code := int(binary.BigEndian.Uint16(payload))
			if !validReceivedCloseCode(code) {
				return 0, 0, false, protocolFrameError("bad close code " + strconv.Itoa(code))
			}
			if !utf8.Valid(payload[2:]) {
				return 0, 0, false, protocolFrameError("invalid utf8 payload in close frame")
			}
		}
	}
	return total, 0, emit(op, payload), nil
}

// protocolFrameError is a framing violation: the session closes with 1002
// and the reason gorilla gave.
func protocolFrameError(reason string) *frameError {
	return &frameError{Code: closeProtocol, Reason: reason, Err: errors.New("push: websocket: " + reason)}
}

// unmask applies the client's mask key to p in place (§5.3).
func unmask(key, p []byte) {
	for i := range p {
		p[i] ^= key[i&3]
	}
}

// validReceivedCloseCode reports whether a peer may send code (§7.4).
func validReceivedCloseCode(code int) bool {
	switch code {
	case 1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014:
		return true
	}
	return code >= 3000 && code <= 4999
}

// closePayload is a close frame's payload: code and reason, the reason cut
// so the payload fits a control frame.
func closePayload(code int, reason string) []byte {
	if code == closeNoStatus {
		return nil
	}
	p := make([]byte, 2, 2+len(reason))
	binary.BigEndian.PutUint16(p, uint16(code))
	p = append(p, reason...)
	if len(p) > maxControlPayload {
		p = p[:maxControlPayload]
	}
	return p
}

// writeFrame writes one unmasked, final server frame to nc with a
// deadline, in one write from a pooled buffer.
func writeFrame(nc net.Conn, op byte, payload []byte, deadline time.Time) error {
	bp := frameBufferPool.Get().(*[]byte)
	defer frameBufferPool.Put(bp)
	b := append((*bp)[:0], finBit|op)
	switch l := len(payload); {
	case l < 126:
		b = append(b, byte(l))
	case l <= 0xffff:
		b = append(b, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(l))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(l))
	}
	b = append(b, payload...)
	if cap(b) <= frameBufferSize {
		*bp = b
	}
	if err := nc.SetWriteDeadline(deadline); err != nil {
		return err
	}
	_, err := nc.Write(b)
	return err
}

// frameBufferSize bounds the pooled buffers frames are written from: a
// buffer grows to the frame it holds, and is kept for the next frame up
// to this size (a notification of the largest body, MaxBodyBytes
// base64url, with its headers). A session holds none between writes.
const frameBufferSize = 16 << 10

var frameBufferPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

// errCloseSent is a write after the session's close frame.
var errCloseSent = errors.New("push: websocket: close sent")
