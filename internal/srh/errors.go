package srh

import (
	"errors"
	"fmt"
)

// Sentinel errors naming why an input was rejected. Every decoding error
// returned by this package is a *ParseError that wraps exactly one of them,
// so callers can test with errors.Is and read the offset with errors.As.
var (
	// ErrTruncated: the input ends before a header it announces.
	ErrTruncated = errors.New("truncated")
	// ErrHdrLen: Hdr Ext Len is inconsistent with Last Entry (the segment
	// list does not fit) or too small to hold one segment.
	ErrHdrLen = errors.New("hdr-len")
	// ErrSegmentsLeft: Segments Left is greater than Last Entry + 1.
	ErrSegmentsLeft = errors.New("segments-left")
	// ErrRoutingType: a routing header whose type is not 4 (SRH).
	ErrRoutingType = errors.New("routing-type")
	// ErrTLVOverflow: a TLV extends beyond the end of the SRH.
	ErrTLVOverflow = errors.New("tlv-overflow")
	// ErrPadding: a PadN TLV longer than 5 octets of padding (RFC 8754
	// §2.1.1.2), or a TLV area that is not a multiple of 8 octets.
	ErrPadding = errors.New("bad-padding")
	// ErrHMAC: an HMAC TLV whose length is not 6 + a multiple of 8 up to 32.
	ErrHMAC = errors.New("bad-hmac-tlv")
	// ErrVersion: the packet does not start with an IPv6 header.
	ErrVersion = errors.New("not-ipv6")
	// ErrPayloadLen: the IPv6 payload length disagrees with the headers.
	ErrPayloadLen = errors.New("payload-length")
	// ErrExtHeader: an extension header chain out of order (Hop-by-Hop not
	// first, a second routing header, a routing header after the final
	// Destination Options).
	ErrExtHeader = errors.New("ext-header")
	// ErrInvalid: a value given to an encoder or builder is unusable
	// (empty path, invalid or non-IPv6 address, too many segments).
	ErrInvalid = errors.New("invalid")
)

// ParseError is the structured error of the decoders: the byte offset (from
// the start of the buffer given to ParseSRH or DecodePacket) where the
// problem was found, the reason sentinel and a human detail.
type ParseError struct {
	Offset int
	Err    error // one of the Err* sentinels
	Detail string
}

func (e *ParseError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("srh: %v at offset %d", e.Err, e.Offset)
	}
	return fmt.Sprintf("srh: %v at offset %d: %s", e.Err, e.Offset, e.Detail)
}

// Unwrap returns the reason sentinel.
func (e *ParseError) Unwrap() error { return e.Err }

// Reason returns the reason name ("truncated", "hdr-len", ...).
func (e *ParseError) Reason() string {
	if e.Err == nil {
		return "unknown"
	}
	return e.Err.Error()
}

func perr(off int, sentinel error, format string, args ...any) *ParseError {
	return &ParseError{Offset: off, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// Reason returns the reason name of err when it comes from this package,
// or "" otherwise.
func Reason(err error) string {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe.Reason()
	}
	return ""
}
