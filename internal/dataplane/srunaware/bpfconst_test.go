package srunaware

import (
	"testing"

	"github.com/segchain/segchain/internal/bpfconst"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// TestBPFConstMatchesProgram fails when the Go tables drift from the
// compiled program: a drop reason without a name, or a flow limit that is
// not the size of the node-wide flow cache.
func TestBPFConstMatchesProgram(t *testing.T) {
	spec, err := loadProxyTC()
	if err != nil {
		t.Fatal(err)
	}
	if err := bpfconst.CheckDropEnum(spec, "proxy_drop_reason", numDropReasons, func(r uint32) string { return DropReason(r).String() }); err != nil {
		t.Error(err)
	}
	if err := bpfconst.CheckMapSize(spec, "flows_map", flowsMax); err != nil {
		t.Error(err)
	}
	if n := len(proxyTCProxyStats{}.Drops); n != numDropReasons {
		t.Errorf("proxy_stats has %d drop counters, Go expects %d", n, numDropReasons)
	}
}

// TestInnerMatchesProgram: the inner packet types of the pure spec
// (srunaware) are the eBPF program's enum proxy_inner.
func TestInnerMatchesProgram(t *testing.T) {
	for _, c := range []struct {
		go_ Inner
		c   proxyTCProxyInner
	}{{InnerAny, proxyTCProxyInnerPROXY_INNER_ANY}, {InnerIPv6, proxyTCProxyInnerPROXY_INNER_IPV6},
		{InnerIPv4, proxyTCProxyInnerPROXY_INNER_IPV4}, {InnerEthernet, proxyTCProxyInnerPROXY_INNER_ETH}} {
		if uint8(c.go_) != uint8(c.c) {
			t.Errorf("inner %s: Go %d, C %d", c.go_, c.go_, c.c)
		}
	}
}

// TestSpecLimitsMatchProgram: the limits the pure spec validates against
// are the program's.
func TestSpecLimitsMatchProgram(t *testing.T) {
	if srunaware.FlowsMax != flowsMax {
		t.Errorf("srunaware.FlowsMax %d, PROXY_FLOWS_MAX %d", srunaware.FlowsMax, flowsMax)
	}
	if srunaware.CacheHdrMax != cacheHdrMax {
		t.Errorf("srunaware.CacheHdrMax %d, proxy_cache.hdr %d", srunaware.CacheHdrMax, cacheHdrMax)
	}
	spec, err := loadProxyTC()
	if err != nil {
		t.Fatal(err)
	}
	if err := bpfconst.CheckMapSize(spec, "sids_map", srunaware.SIDsMax); err != nil {
		t.Errorf("srunaware.SIDsMax: %v", err)
	}
}
