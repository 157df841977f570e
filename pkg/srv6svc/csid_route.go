package srv6svc

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// endNextCSID is the seg6local encap "End flavors next-csid lblen LB
// nflen NF" (the binding's C-SID format: F3216's 32/16, F4816's 48/16
// ...), which vishvananda/netlink cannot express: the on-failure bypass
// route of a uSID binding. The lengths are always sent: the kernel's
// defaults are F3216's only.
type endNextCSID struct{ f CSIDFormat }

const (
	seg6LocalAction       = 1  // SEG6_LOCAL_ACTION
	seg6LocalActionEnd    = 1  // SEG6_LOCAL_ACTION_END
	seg6LocalFlavors      = 11 // SEG6_LOCAL_FLAVORS
	seg6LocalFlvOperation = 1  // SEG6_LOCAL_FLV_OPERATION
	seg6LocalFlvNextCSID  = 4  // SEG6_LOCAL_FLV_OP_NEXT_CSID
	seg6LocalFlvLCBlock   = 2  // SEG6_LOCAL_FLV_LCBLOCK_BITS (u8)
	seg6LocalFlvLCNodeFn  = 3  // SEG6_LOCAL_FLV_LCNODE_FN_BITS (u8)
)

func (endNextCSID) Type() int { return unix.LWTUNNEL_ENCAP_SEG6_LOCAL }

func (e endNextCSID) Encode() ([]byte, error) {
	if !e.f.ok() || e.f.LBLen > 255 || e.f.NFLen > 255 {
		return nil, fmt.Errorf("End next-csid: C-SID format %s", e.f)
	}
	out := nl.NewRtAttr(seg6LocalAction, nl.Uint32Attr(seg6LocalActionEnd)).Serialize()
	nest := nl.NewRtAttr(seg6LocalFlavors|unix.NLA_F_NESTED, nil)
	nest.AddRtAttr(seg6LocalFlvOperation, nl.Uint32Attr(1<<seg6LocalFlvNextCSID))
	nest.AddRtAttr(seg6LocalFlvLCBlock, []byte{uint8(e.f.LBLen)})
	nest.AddRtAttr(seg6LocalFlvLCNodeFn, []byte{uint8(e.f.NFLen)})
	return append(out, nest.Serialize()...), nil
}

func (endNextCSID) Decode([]byte) error { return nil }
func (e endNextCSID) String() string {
	return fmt.Sprintf("End flavors next-csid lblen %d nflen %d", e.f.LBLen, e.f.NFLen)
}
func (e endNextCSID) Equal(x netlink.Encap) bool { o, ok := x.(endNextCSID); return ok && o.f == e.f }
