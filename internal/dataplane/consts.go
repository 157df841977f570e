package dataplane

import "golang.org/x/sys/unix"

// Kernel UAPI constants that golang.org/x/sys/unix does not define.

// include/uapi/linux/seg6_iptunnel.h
const (
	seg6IptunnelSRH = 1 // SEG6_IPTUNNEL_SRH

	seg6ModeInline     = 0 // SEG6_IPTUN_MODE_INLINE
	seg6ModeEncap      = 1 // SEG6_IPTUN_MODE_ENCAP
	seg6ModeL2Encap    = 2 // SEG6_IPTUN_MODE_L2ENCAP
	seg6ModeEncapRed   = 3 // SEG6_IPTUN_MODE_ENCAP_RED
	seg6ModeL2EncapRed = 4 // SEG6_IPTUN_MODE_L2ENCAP_RED
)

// include/uapi/linux/seg6_local.h
const (
	seg6LocalAction   = 1  // SEG6_LOCAL_ACTION
	seg6LocalSRH      = 2  // SEG6_LOCAL_SRH
	seg6LocalTable    = 3  // SEG6_LOCAL_TABLE
	seg6LocalNH4      = 4  // SEG6_LOCAL_NH4
	seg6LocalNH6      = 5  // SEG6_LOCAL_NH6
	seg6LocalIIF      = 6  // SEG6_LOCAL_IIF
	seg6LocalOIF      = 7  // SEG6_LOCAL_OIF
	seg6LocalBPF      = 8  // SEG6_LOCAL_BPF
	seg6LocalVRFTable = 9  // SEG6_LOCAL_VRFTABLE
	seg6LocalCounters = 10 // SEG6_LOCAL_COUNTERS
	seg6LocalFlavors  = 11 // SEG6_LOCAL_FLAVORS

	seg6LocalBPFProg     = 1 // SEG6_LOCAL_BPF_PROG
	seg6LocalBPFProgName = 2 // SEG6_LOCAL_BPF_PROG_NAME

	seg6LocalCntPackets = 2 // SEG6_LOCAL_CNT_PACKETS
	seg6LocalCntBytes   = 3 // SEG6_LOCAL_CNT_BYTES
	seg6LocalCntErrors  = 4 // SEG6_LOCAL_CNT_ERRORS

	seg6LocalFlvOperation    = 1 // SEG6_LOCAL_FLV_OPERATION
	seg6LocalFlvLCBlockBits  = 2 // SEG6_LOCAL_FLV_LCBLOCK_BITS
	seg6LocalFlvLCNodeFnBits = 3 // SEG6_LOCAL_FLV_LCNODE_FN_BITS
)

// seg6local actions, SEG6_LOCAL_ACTION_* in include/uapi/linux/seg6_local.h,
// keyed by their iproute2 spelling.
var seg6LocalActions = map[string]uint32{
	"End":           1,
	"End.X":         2,
	"End.T":         3,
	"End.DX2":       4,
	"End.DX6":       5,
	"End.DX4":       6,
	"End.DT6":       7,
	"End.DT4":       8,
	"End.B6":        9,
	"End.B6.Encaps": 10,
	"End.BM":        11,
	"End.S":         12,
	"End.AS":        13,
	"End.AM":        14,
	"End.BPF":       15,
	"End.DT46":      16,
}

// Flavor operations, SEG6_LOCAL_FLV_OP_* (bit numbers of the OPERATION bitmask).
var seg6LocalFlavorOps = []struct {
	name string
	bit  uint
}{
	{"psp", 1},       // SEG6_LOCAL_FLV_OP_PSP
	{"usp", 2},       // SEG6_LOCAL_FLV_OP_USP
	{"usd", 3},       // SEG6_LOCAL_FLV_OP_USD
	{"next-csid", 4}, // SEG6_LOCAL_FLV_OP_NEXT_CSID
}

// include/uapi/linux/seg6.h and seg6_hmac.h
const (
	sr6Flag1HMAC   = 1 << 3 // SR6_FLAG1_HMAC
	hmacFieldLen   = 32     // SEG6_HMAC_FIELD_LEN
	hmacSecretMax  = 64     // SEG6_HMAC_SECRET_LEN
	hmacAlgoSHA1   = 1      // SEG6_HMAC_ALGO_SHA1
	hmacAlgoSHA256 = 2      // SEG6_HMAC_ALGO_SHA256
)

// include/uapi/linux/seg6_genl.h
const (
	seg6GenlName    = "SEG6"
	seg6GenlVersion = 1

	seg6AttrDst       = 1 // SEG6_ATTR_DST
	seg6AttrDstLen    = 2 // SEG6_ATTR_DSTLEN
	seg6AttrHMACKeyID = 3 // SEG6_ATTR_HMACKEYID
	seg6AttrSecret    = 4 // SEG6_ATTR_SECRET
	seg6AttrSecretLen = 5 // SEG6_ATTR_SECRETLEN
	seg6AttrAlgID     = 6 // SEG6_ATTR_ALGID
	seg6AttrHMACInfo  = 7 // SEG6_ATTR_HMACINFO
	seg6CmdSetHMAC    = 1 // SEG6_CMD_SETHMAC
	seg6CmdDumpHMAC   = 2 // SEG6_CMD_DUMPHMAC
	seg6CmdSetTunSrc  = 3 // SEG6_CMD_SET_TUNSRC
	seg6CmdGetTunSrc  = 4 // SEG6_CMD_GET_TUNSRC
)

// nlaTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER (include/uapi/linux/netlink.h).
const nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
