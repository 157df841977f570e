package srv6svc

import (
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// endNextCSID is the seg6local encap "End flavors next-csid" (the
// kernel's default lengths, lblen 32 nflen 16: F3216), which
// vishvananda/netlink cannot express: the on-failure bypass route of a
// uSID binding.
type endNextCSID struct{}

const (
	seg6LocalAction       = 1  // SEG6_LOCAL_ACTION
	seg6LocalActionEnd    = 1  // SEG6_LOCAL_ACTION_END
	seg6LocalFlavors      = 11 // SEG6_LOCAL_FLAVORS
	seg6LocalFlvOperation = 1  // SEG6_LOCAL_FLV_OPERATION
	seg6LocalFlvNextCSID  = 4  // SEG6_LOCAL_FLV_OP_NEXT_CSID
)

func (endNextCSID) Type() int { return unix.LWTUNNEL_ENCAP_SEG6_LOCAL }

func (endNextCSID) Encode() ([]byte, error) {
	out := nl.NewRtAttr(seg6LocalAction, nl.Uint32Attr(seg6LocalActionEnd)).Serialize()
	nest := nl.NewRtAttr(seg6LocalFlavors|unix.NLA_F_NESTED, nil)
	nest.AddRtAttr(seg6LocalFlvOperation, nl.Uint32Attr(1<<seg6LocalFlvNextCSID))
	return append(out, nest.Serialize()...), nil
}

func (endNextCSID) Decode([]byte) error        { return nil }
func (endNextCSID) String() string             { return "End flavors next-csid" }
func (endNextCSID) Equal(x netlink.Encap) bool { _, ok := x.(endNextCSID); return ok }
