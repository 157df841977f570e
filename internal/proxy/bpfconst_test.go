package proxy

import (
	"testing"

	"github.com/segchain/segchain/internal/bpfconst"
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
