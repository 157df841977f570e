package bfd

import (
	"encoding/binary"
	"fmt"
)

// Version is the BFD protocol version (RFC 5880 §4.1).
const Version = 1

// Port is the destination port of single-hop BFD control packets (RFC
// 5881 §4); the source port is one of SourcePortMin..SourcePortMax.
const (
	Port          = 3784
	SourcePortMin = 49152
	SourcePortMax = 65535
)

// HopLimit is what single-hop packets are sent with and what a received
// one must have (RFC 5881 §5, the GTSM of RFC 5082): a packet that crossed
// a router cannot have it.
const HopLimit = 255

// headerLen is a control packet without the authentication section.
const headerLen = 24

// State is a session state (RFC 5880 §4.1 "Sta").
type State uint8

const (
	AdminDown State = 0
	Down      State = 1
	Init      State = 2
	Up        State = 3
)

func (s State) String() string {
	switch s {
	case AdminDown:
		return "admin-down"
	case Down:
		return "down"
	case Init:
		return "init"
	case Up:
		return "up"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Diag is a diagnostic code: why the session last left Up (§4.1).
type Diag uint8

const (
	DiagNone              Diag = 0
	DiagTimeExpired       Diag = 1
	DiagEchoFailed        Diag = 2
	DiagNeighborDown      Diag = 3
	DiagForwardingReset   Diag = 4
	DiagPathDown          Diag = 5
	DiagConcatPathDown    Diag = 6
	DiagAdminDown         Diag = 7
	DiagRevConcatPathDown Diag = 8
)

var diagNames = [...]string{"none", "control detection time expired", "echo function failed",
	"neighbor signaled session down", "forwarding plane reset", "path down",
	"concatenated path down", "administratively down", "reverse concatenated path down"}

func (d Diag) String() string {
	if int(d) < len(diagNames) {
		return diagNames[d]
	}
	return fmt.Sprintf("diag(%d)", uint8(d))
}

// Packet is a BFD control packet. Intervals are in microseconds, as on
// the wire.
type Packet struct {
	Version                               uint8
	Diag                                  Diag
	State                                 State
	Poll, Final, CPI, Auth, Demand, Multi bool
	DetectMult                            uint8
	MyDisc, YourDisc                      uint32
	DesiredMinTx, RequiredMinRx           uint32
	RequiredMinEchoRx                     uint32
}

// Marshal encodes p (without authentication: Auth must be false).
func (p *Packet) Marshal() []byte {
	b := make([]byte, headerLen)
	b[0] = p.Version<<5 | uint8(p.Diag)&0x1f
	f := uint8(p.State&3) << 6
	for i, set := range []bool{p.Poll, p.Final, p.CPI, p.Auth, p.Demand, p.Multi} {
		if set {
			f |= 1 << (5 - i)
		}
	}
	b[1] = f
	b[2] = p.DetectMult
	b[3] = headerLen
	binary.BigEndian.PutUint32(b[4:], p.MyDisc)
	binary.BigEndian.PutUint32(b[8:], p.YourDisc)
	binary.BigEndian.PutUint32(b[12:], p.DesiredMinTx)
	binary.BigEndian.PutUint32(b[16:], p.RequiredMinRx)
	binary.BigEndian.PutUint32(b[20:], p.RequiredMinEchoRx)
	return b
}

// Reason is why a received packet was dropped (RFC 5880 §6.8.6, RFC 5881
// §5, and this implementation's limits).
type Reason uint8

const (
	ReasonNone Reason = iota
	ReasonShort
	ReasonVersion
	ReasonLength
	ReasonDetectMult
	ReasonMultipoint
	ReasonMyDisc
	ReasonYourDisc // does not name this session
	ReasonZeroYourDisc
	ReasonAuth // authentication is not implemented
	ReasonHopLimit
	ReasonSource // not from the session's peer
	numReasons
)

var reasonNames = [...]string{"none", "short", "bad-version", "bad-length", "zero-detect-mult",
	"multipoint", "zero-my-discriminator", "unknown-your-discriminator",
	"zero-your-discriminator-not-down", "authentication", "hop-limit", "unknown-source"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// DropError is a packet Parse refused.
type DropError struct{ Reason Reason }

func (e *DropError) Error() string { return "bfd: packet dropped: " + e.Reason.String() }

// Parse decodes and checks a received control packet: the checks of RFC
// 5880 §6.8.6 that need no session (those on Your Discriminator need one:
// Session.Receive). An authenticated packet is refused: this
// implementation has no authentication.
func Parse(b []byte) (Packet, error) {
	var p Packet
	if len(b) < headerLen {
		return p, &DropError{ReasonShort}
	}
	p.Version = b[0] >> 5
	p.Diag = Diag(b[0] & 0x1f)
	p.State = State(b[1] >> 6)
	f := b[1]
	p.Poll, p.Final, p.CPI = f&0x20 != 0, f&0x10 != 0, f&0x08 != 0
	p.Auth, p.Demand, p.Multi = f&0x04 != 0, f&0x02 != 0, f&0x01 != 0
	p.DetectMult = b[2]
	length := int(b[3])
	p.MyDisc = binary.BigEndian.Uint32(b[4:])
	p.YourDisc = binary.BigEndian.Uint32(b[8:])
	p.DesiredMinTx = binary.BigEndian.Uint32(b[12:])
	p.RequiredMinRx = binary.BigEndian.Uint32(b[16:])
	p.RequiredMinEchoRx = binary.BigEndian.Uint32(b[20:])
	min := headerLen
	if p.Auth {
		min = headerLen + 2 // the authentication section's type and length
	}
	switch {
	case p.Version != Version:
		return p, &DropError{ReasonVersion}
	case length < min || length > len(b):
		return p, &DropError{ReasonLength}
	case p.DetectMult == 0:
		return p, &DropError{ReasonDetectMult}
	case p.Multi:
		return p, &DropError{ReasonMultipoint}
	case p.MyDisc == 0:
		return p, &DropError{ReasonMyDisc}
	case p.Auth:
		return p, &DropError{ReasonAuth}
	}
	return p, nil
}

// nativeEndian reads control messages (host byte order).
var nativeEndian = binary.NativeEndian
