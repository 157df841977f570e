package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/srh"
)

// SRHFlagO is the SRH's O-flag (RFC 9259 §2.1), in the flags byte.
const SRHFlagO = 0x20

// ErrMalformed is wrapped by decoders when kernel bytes are inconsistent.
var ErrMalformed = errors.New("malformed attribute")

// EncodeSRH builds the Segment Routing Header handed to the kernel in
// netlink (RFC 8754 §2 layout, next header 0, the kernel fills it).
// segs is in path order (segs[0] is visited first); on the wire the list is
// reversed. With reserveDA (H.Insert, End.B6) an extra Segment List[0] slot
// is left zero for the kernel to store the original destination, exactly as
// iproute2 does. A non-zero hmacKeyID sets the H flag and appends a 40-byte
// HMAC TLV (type 5, length 38, key id, HMAC left zero: the kernel computes it).
func EncodeSRH(segs []netip.Addr, reserveDA bool, hmacKeyID uint32) ([]byte, error) {
	if len(segs) == 0 {
		return nil, errors.New("srh: empty segment list")
	}
	path := segs
	if reserveDA {
		path = append(append([]netip.Addr(nil), segs...), netip.IPv6Unspecified())
	}
	for _, a := range segs {
		if !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("srh: segment %s is not an IPv6 address", a)
		}
	}
	tlv := 0
	if hmacKeyID != 0 {
		tlv = srh.HMACTLVLen
	}
	if max := srh.MaxPath(tlv); len(path) > max {
		return nil, fmt.Errorf("srh: %d segments do not fit (an SRH holds at most %d)", len(path), max)
	}
	h := srh.NewPath(path...) // next header 0: the kernel fills it
	if hmacKeyID != 0 {
		h.Flags = sr6Flag1HMAC
		h.TLVs = []srh.TLV{srh.NewHMACTLV(false, hmacKeyID, make([]byte, hmacFieldLen))}
	}
	b, err := h.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("srh: %w", err)
	}
	return b, nil
}

// DecodeSRH parses an SRH as stored by the kernel and returns the segment
// list in path order (dropping Segment List[0] when reservedDA) and the HMAC
// key id of an HMAC TLV, if any.
func DecodeSRH(b []byte, reservedDA bool) (segs []netip.Addr, hmacKeyID uint32, err error) {
	h, err := srh.ParseSRH(b)
	if err != nil {
		return nil, 0, fmt.Errorf("srh: %v: %w", err, ErrMalformed)
	}
	segs = h.Path()
	if reservedDA && len(segs) > 0 {
		segs = segs[:len(segs)-1]
	}
	for _, t := range h.TLVs {
		if m, ok := t.HMAC(); ok {
			hmacKeyID = m.KeyID
		}
	}
	return segs, hmacKeyID, nil
}

var seg6Modes = map[string]uint32{
	"inline":      seg6ModeInline,
	"encap":       seg6ModeEncap,
	"l2encap":     seg6ModeL2Encap,
	"encap.red":   seg6ModeEncapRed,
	"l2encap.red": seg6ModeL2EncapRed,
}

func seg6ModeName(m uint32) string {
	for k, v := range seg6Modes {
		if v == m {
			return k
		}
	}
	return fmt.Sprintf("mode%d", m)
}

// Seg6Encap is the netlink.Encap of an `encap seg6` route (LWTUNNEL_ENCAP_SEG6):
// all five modes and the HMAC TLV, which vishvananda/netlink lacks.
type Seg6Encap struct {
	nodestate.Seg6Encap
}

var _ netlink.Encap = (*Seg6Encap)(nil)

// Type returns LWTUNNEL_ENCAP_SEG6.
func (e *Seg6Encap) Type() int { return unix.LWTUNNEL_ENCAP_SEG6 }

// Encode returns the RTA_ENCAP payload: one SEG6_IPTUNNEL_SRH attribute
// holding struct seg6_iptunnel_encap {int mode; struct ipv6_sr_hdr srh[]}.
func (e *Seg6Encap) Encode() ([]byte, error) {
	mode, ok := seg6Modes[e.Mode]
	if !ok {
		return nil, fmt.Errorf("seg6: unknown mode %q", e.Mode)
	}
	srh, err := EncodeSRH(e.Segs, mode == seg6ModeInline, e.HMACKeyID)
	if err != nil {
		return nil, fmt.Errorf("seg6: %w", err)
	}
	if e.OFlag {
		srh[5] |= SRHFlagO // the kernel copies the flags as given (and signs them)
	}
	v := make([]byte, 4, 4+len(srh))
	nl.NativeEndian().PutUint32(v, mode)
	v = append(v, srh...)
	return nl.NewRtAttr(seg6IptunnelSRH, v).Serialize(), nil
}

// Decode parses an RTA_ENCAP payload of type seg6.
func (e *Seg6Encap) Decode(b []byte) error {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return fmt.Errorf("seg6: %w", err)
	}
	for _, a := range attrs {
		if a.Attr.Type&nlaTypeMask != seg6IptunnelSRH {
			continue
		}
		if len(a.Value) < 4 {
			return fmt.Errorf("seg6: short tunnel info: %w", ErrMalformed)
		}
		mode := nl.NativeEndian().Uint32(a.Value[:4])
		segs, keyID, err := DecodeSRH(a.Value[4:], mode == seg6ModeInline)
		if err != nil {
			return fmt.Errorf("seg6: %w", err)
		}
		e.Seg6Encap = nodestate.Seg6Encap{Mode: seg6ModeName(mode), Segs: segs, HMACKeyID: keyID}
		e.OFlag = len(a.Value) > 9 && a.Value[4+5]&SRHFlagO != 0
		return nil
	}
	return fmt.Errorf("seg6: no SEG6_IPTUNNEL_SRH: %w", ErrMalformed)
}

func (e *Seg6Encap) String() string { return e.Seg6Encap.String() }

// Equal compares two seg6 encaps.
func (e *Seg6Encap) Equal(x netlink.Encap) bool {
	o, ok := x.(*Seg6Encap)
	if !ok {
		return false
	}
	return e.Mode == o.Mode && e.HMACKeyID == o.HMACKeyID && e.OFlag == o.OFlag && slices.Equal(e.Segs, o.Segs)
}

// Seg6LocalEncap is the netlink.Encap of an `encap seg6local` route
// (LWTUNNEL_ENCAP_SEG6_LOCAL), including counters, flavors, vrftable and
// End.BPF, which vishvananda/netlink lacks. Interface names in Seg6Local are
// not used by Encode: it sends IifIndex/OifIndex, which callers resolve.
type Seg6LocalEncap struct {
	nodestate.Seg6Local
	IifIndex int
	OifIndex int
	// BPFFd is the program fd sent for End.BPF; Seg6Local.BPF is sent as the
	// program name so that a dump gives the pinned path back.
	BPFFd int
	// Filled by Decode.
	Counters  *Counters
	BPFProgID uint32
}

var _ netlink.Encap = (*Seg6LocalEncap)(nil)

// Type returns LWTUNNEL_ENCAP_SEG6_LOCAL.
func (e *Seg6LocalEncap) Type() int { return unix.LWTUNNEL_ENCAP_SEG6_LOCAL }

func u32(v uint32) []byte { return nl.Uint32Attr(v) }

// Encode returns the RTA_ENCAP payload (SEG6_LOCAL_* attributes).
func (e *Seg6LocalEncap) Encode() ([]byte, error) {
	action, ok := seg6LocalActions[e.Action]
	if !ok {
		return nil, fmt.Errorf("seg6local: unknown action %q", e.Action)
	}
	var out []byte
	add := func(a *nl.RtAttr) { out = append(out, a.Serialize()...) }
	add(nl.NewRtAttr(seg6LocalAction, u32(action)))
	if len(e.Segs) > 0 {
		srh, err := EncodeSRH(e.Segs, e.Action == "End.B6", e.HMAC)
		if err != nil {
			return nil, fmt.Errorf("seg6local: %w", err)
		}
		add(nl.NewRtAttr(seg6LocalSRH, srh))
	}
	if e.Table != 0 {
		add(nl.NewRtAttr(seg6LocalTable, u32(uint32(e.Table))))
	}
	if e.Nh4.IsValid() {
		if !e.Nh4.Is4() {
			return nil, fmt.Errorf("seg6local: nh4 %s is not IPv4", e.Nh4)
		}
		a := e.Nh4.As4()
		add(nl.NewRtAttr(seg6LocalNH4, a[:]))
	}
	if e.Nh6.IsValid() {
		if !e.Nh6.Is6() {
			return nil, fmt.Errorf("seg6local: nh6 %s is not IPv6", e.Nh6)
		}
		a := e.Nh6.As16()
		add(nl.NewRtAttr(seg6LocalNH6, a[:]))
	}
	if e.IifIndex != 0 {
		add(nl.NewRtAttr(seg6LocalIIF, u32(uint32(e.IifIndex))))
	}
	if e.OifIndex != 0 {
		add(nl.NewRtAttr(seg6LocalOIF, u32(uint32(e.OifIndex))))
	}
	if e.Action == "End.BPF" || e.BPF != "" {
		if e.BPFFd <= 0 {
			return nil, errors.New("seg6local: End.BPF needs a program fd")
		}
		nest := nl.NewRtAttr(seg6LocalBPF|unix.NLA_F_NESTED, nil)
		nest.AddRtAttr(seg6LocalBPFProg, u32(uint32(e.BPFFd)))
		nest.AddRtAttr(seg6LocalBPFProgName, nl.ZeroTerminated(e.BPF))
		add(nest)
	}
	if e.VRFTable != 0 {
		add(nl.NewRtAttr(seg6LocalVRFTable, u32(uint32(e.VRFTable))))
	}
	if e.Count {
		// The kernel requires all three counters present (values ignored).
		nest := nl.NewRtAttr(seg6LocalCounters|unix.NLA_F_NESTED, nil)
		nest.AddRtAttr(seg6LocalCntPackets, nl.Uint64Attr(0))
		nest.AddRtAttr(seg6LocalCntBytes, nl.Uint64Attr(0))
		nest.AddRtAttr(seg6LocalCntErrors, nl.Uint64Attr(0))
		add(nest)
	}
	if len(e.Flavors) > 0 {
		var ops uint32
		for _, f := range e.Flavors {
			bit, ok := flavorBit(f)
			if !ok {
				return nil, fmt.Errorf("seg6local: unknown flavor %q", f)
			}
			ops |= 1 << bit
		}
		nest := nl.NewRtAttr(seg6LocalFlavors|unix.NLA_F_NESTED, nil)
		nest.AddRtAttr(seg6LocalFlvOperation, u32(ops))
		if e.LBLen != 0 || e.NFLen != 0 {
			// NEXT-C-SID's lengths (the kernel takes them with next-csid
			// only, u8 bits each, and checks them: multiples of 8).
			if !slices.Contains(e.Flavors, "next-csid") {
				return nil, fmt.Errorf("seg6local: lblen %d nflen %d without flavor next-csid", e.LBLen, e.NFLen)
			}
			if e.LBLen <= 0 || e.LBLen > 255 || e.NFLen <= 0 || e.NFLen > 255 {
				return nil, fmt.Errorf("seg6local: lblen %d nflen %d: want both, 1..255 bits", e.LBLen, e.NFLen)
			}
			nest.AddRtAttr(seg6LocalFlvLCBlockBits, []byte{uint8(e.LBLen)})
			nest.AddRtAttr(seg6LocalFlvLCNodeFnBits, []byte{uint8(e.NFLen)})
		}
		add(nest)
	}
	return out, nil
}

func flavorBit(name string) (uint, bool) {
	for _, f := range seg6LocalFlavorOps {
		if f.name == strings.ToLower(name) {
			return f.bit, true
		}
	}
	return 0, false
}

// Decode parses an RTA_ENCAP payload of type seg6local. Interface indexes
// are left in IifIndex/OifIndex; Iif/Oif names are not filled.
func (e *Seg6LocalEncap) Decode(b []byte) error {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return fmt.Errorf("seg6local: %w", err)
	}
	*e = Seg6LocalEncap{}
	ne := nl.NativeEndian()
	need := func(v []byte, n int, what string) error {
		if len(v) < n {
			return fmt.Errorf("seg6local: short %s (%d bytes): %w", what, len(v), ErrMalformed)
		}
		return nil
	}
	for _, a := range attrs {
		v := a.Value
		switch a.Attr.Type & nlaTypeMask {
		case seg6LocalAction:
			if err := need(v, 4, "action"); err != nil {
				return err
			}
			act := ne.Uint32(v)
			e.Action = fmt.Sprintf("action%d", act)
			for k, x := range seg6LocalActions {
				if x == act {
					e.Action = k
				}
			}
		case seg6LocalSRH:
			// The action is always dumped first, so it is known here.
			segs, keyID, err := DecodeSRH(v, e.Action == "End.B6")
			if err != nil {
				return fmt.Errorf("seg6local: %w", err)
			}
			e.Segs, e.HMAC = segs, keyID
		case seg6LocalTable:
			if err := need(v, 4, "table"); err != nil {
				return err
			}
			e.Table = int(ne.Uint32(v))
		case seg6LocalVRFTable:
			if err := need(v, 4, "vrftable"); err != nil {
				return err
			}
			e.VRFTable = int(ne.Uint32(v))
		case seg6LocalNH4:
			if err := need(v, 4, "nh4"); err != nil {
				return err
			}
			e.Nh4 = netip.AddrFrom4([4]byte(v[:4]))
		case seg6LocalNH6:
			if err := need(v, 16, "nh6"); err != nil {
				return err
			}
			e.Nh6 = netip.AddrFrom16([16]byte(v[:16]))
		case seg6LocalIIF:
			if err := need(v, 4, "iif"); err != nil {
				return err
			}
			e.IifIndex = int(ne.Uint32(v))
		case seg6LocalOIF:
			if err := need(v, 4, "oif"); err != nil {
				return err
			}
			e.OifIndex = int(ne.Uint32(v))
		case seg6LocalBPF:
			sub, err := nl.ParseRouteAttr(v)
			if err != nil {
				return fmt.Errorf("seg6local: bpf: %w", err)
			}
			for _, s := range sub {
				switch s.Attr.Type & nlaTypeMask {
				case seg6LocalBPFProg:
					if len(s.Value) >= 4 {
						e.BPFProgID = ne.Uint32(s.Value)
					}
				case seg6LocalBPFProgName:
					e.BPF = nl.BytesToString(s.Value)
				}
			}
		case seg6LocalCounters:
			sub, err := nl.ParseRouteAttr(v)
			if err != nil {
				return fmt.Errorf("seg6local: counters: %w", err)
			}
			e.Count = true
			c := &Counters{}
			for _, s := range sub {
				if len(s.Value) < 8 {
					continue
				}
				x := ne.Uint64(s.Value)
				switch s.Attr.Type & nlaTypeMask {
				case seg6LocalCntPackets:
					c.Packets = x
				case seg6LocalCntBytes:
					c.Bytes = x
				case seg6LocalCntErrors:
					c.Errors = x
				}
			}
			e.Counters = c
		case seg6LocalFlavors:
			sub, err := nl.ParseRouteAttr(v)
			if err != nil {
				return fmt.Errorf("seg6local: flavors: %w", err)
			}
			for _, s := range sub {
				switch s.Attr.Type & nlaTypeMask {
				case seg6LocalFlvOperation:
					if len(s.Value) < 4 {
						continue
					}
					ops := ne.Uint32(s.Value)
					for _, f := range seg6LocalFlavorOps {
						if ops&(1<<f.bit) != 0 {
							e.Flavors = append(e.Flavors, f.name)
						}
					}
				case seg6LocalFlvLCBlockBits:
					if len(s.Value) >= 1 {
						e.LBLen = int(s.Value[0])
					}
				case seg6LocalFlvLCNodeFnBits:
					if len(s.Value) >= 1 {
						e.NFLen = int(s.Value[0])
					}
				}
			}
		}
	}
	if e.Action == "" {
		return fmt.Errorf("seg6local: no action: %w", ErrMalformed)
	}
	return nil
}

func (e *Seg6LocalEncap) String() string { return e.Seg6Local.String() }

// Equal compares the behaviour (not the counters).
func (e *Seg6LocalEncap) Equal(x netlink.Encap) bool {
	o, ok := x.(*Seg6LocalEncap)
	if !ok {
		return false
	}
	return e.Seg6Local.String() == o.Seg6Local.String() &&
		e.IifIndex == o.IifIndex && e.OifIndex == o.OifIndex
}
