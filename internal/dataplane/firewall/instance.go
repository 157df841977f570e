package firewall

import (
	"errors"
	"net/netip"

	"github.com/segchain/segchain/internal/fwrule"
)

// ErrNotSupported marks a kernel feature the firewall needs and this
// kernel lacks (TCX, BPF_PROG_TEST_RUN ...).
var ErrNotSupported = errors.New("not supported")

// Instance is one End.AN.FW firewall: the SID prefix it serves, its rules
// in order, the policy when none matches, and its eval-args table.
type Instance struct {
	SID      netip.Prefix `json:"sid"`
	ArgsBits int          `json:"args_bits,omitempty"` // rightmost bits of the active SID that are ARGS
	// Policy is fwrule.Accept (go-next) or fwrule.Drop.
	Policy fwrule.TargetKind `json:"policy"`
	Rules  []fwrule.Rule     `json:"-"`
	// Args maps ARGS values to actions for eval-args; nil = the default
	// table (0 go-next, 1 drop, 2 skip-next, 3 go-last).
	Args map[uint32]fwrule.TargetKind `json:"args,omitempty"`
	// CSIDLBLen/CSIDNFLen (bits) make the SID a uSID: go-next shifts
	// the container (bpf/lib/csid.h). 0 for a full SID.
	CSIDLBLen int `json:"csid_lblen,omitempty"`
	CSIDNFLen int `json:"csid_nflen,omitempty"`
}

// Counters are one instance's statistics, summed over CPUs.
type Counters struct {
	Packets     uint64            `json:"packets"`
	Bytes       uint64            `json:"bytes"`
	Forwarded   uint64            `json:"forwarded"`    // End / skip-next / go-last applied, sent on
	Delivered   uint64            `json:"delivered"`    // accepted with no next segment: to the stack
	GoNext      uint64            `json:"go_next"`      // of which by go-next (accept)
	SkipNext    uint64            `json:"skip_next"`    // ... skip-next
	GoLast      uint64            `json:"go_last"`      // ... go-last
	Policy      uint64            `json:"policy"`       // packets no rule matched
	ICMPSent    uint64            `json:"icmp_sent"`    // Parameter Problem / Destination Unreachable sent
	ICMPLimited uint64            `json:"icmp_limited"` // suppressed by the rate limit
	Drops       map[string]uint64 `json:"drops,omitempty"`
}

// RuleCounter is one rule with its packet and byte counters.
type RuleCounter struct {
	Num     int    `json:"num"` // 1-based position, as `fw del` takes it
	Rule    string `json:"rule"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Status is an installed instance as List reports it.
type Status struct {
	Instance Instance      `json:"instance"`
	ID       uint32        `json:"id"`
	Slot     uint32        `json:"slot"` // active table slot (0/1), flips on every rule update
	Counters Counters      `json:"counters"`
	Rules    []RuleCounter `json:"rules"`
}
