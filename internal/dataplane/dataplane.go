package dataplane

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
)

// ErrNotSupported is returned (wrapped) when the running kernel lacks a feature.
var ErrNotSupported = errors.New("not supported by this kernel")

// IsNotExist reports whether err says the route, rule, key or SID to
// delete or update does not exist (ESRCH from rtnetlink, ENOENT from the
// SEG6 family and rule deletion).
func IsNotExist(err error) bool {
	return errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)
}

// LocalSID is one seg6local route with its counters.
type LocalSID struct {
	Route    nodestate.Route `json:"route"`
	Protocol int             `json:"protocol"`           // rtnetlink protocol; nodestate.Proto when segchain owns it
	Counters *Counters       `json:"counters,omitempty"` // nil when the route has no `count`
}

// Counters are the per-SID counters of a seg6local route with `count`.
// Errors counts packets the behaviour dropped (e.g. End on a packet
// without SRH); Packets and Bytes count the others.
type Counters struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	Errors  uint64 `json:"errors"`
}

// Feature is one probed kernel capability.
type Feature struct {
	Name      string `json:"name"`
	Supported bool   `json:"supported"`
	Reason    string `json:"reason,omitempty"`
}

// Features is the result of Probe.
type Features struct {
	VRF            Feature `json:"vrf"`
	EndDT4         Feature `json:"end_dt4"`
	EndDT46        Feature `json:"end_dt46"`
	VRFTable       Feature `json:"vrftable"`
	Counters       Feature `json:"counters"`
	FlavorPSP      Feature `json:"flavor_psp"`
	FlavorNextCSID Feature `json:"flavor_next_csid"`
	EndBPF         Feature `json:"end_bpf"`
	HMAC           Feature `json:"hmac"`
	L2Encap        Feature `json:"l2encap"`
	EncapRed       Feature `json:"encap_red"`
	L2EncapRed     Feature `json:"l2encap_red"`
}
