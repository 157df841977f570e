package usid

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/dataplane/netfilter"
	"github.com/segchain/segchain/internal/testutil"
)

// bulkBytes is enough for the hosts' TCP to build 64 KB GSO packets (veth
// offloads on, as a Linux host has them) and for GRO to aggregate them on
// the way.
const bulkBytes = 4 << 20

// TestBulkTCPThroughUSIDServices: bulk TCP of host s (GSO-sized segments,
// 1500-byte host links, the lab's 9000-byte fabric) through a chain whose
// SR proxy (End.AD, examples/default.yaml's chain firewalled, TCP 8080)
// or End.AN.NF (examples/netfilter.yaml unpinned) holds a uSID in the
// middle of the chain's one container: every byte arrives intact and the
// service drops nothing.
func TestBulkTCPThroughUSIDServices(t *testing.T) {
	t.Run("End.AD", func(t *testing.T) {
		l := up(t, "../../examples/default.yaml", config.SIDFormatF3216)
		if err := testutil.BulkTCP(t, l.NS("s"), l.NS("d"), "fc00:4d::d", 8080, bulkBytes, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		var out uint64
		for _, s := range l.proxies(t) {
			if s.Spec.CSIDNFLen == 0 {
				t.Errorf("proxy %+v is not a uSID proxy", s.Spec)
			}
			out += s.Counters.OutPackets
			if len(s.Counters.Drops) != 0 {
				t.Errorf("proxy %d dropped: %v", s.ID, s.Counters.Drops)
			}
		}
		if out == 0 {
			t.Error("nothing went through the proxy")
		}
	})
	t.Run("End.AN.NF", func(t *testing.T) {
		l := up(t, "../../examples/netfilter.yaml", config.SIDFormatF3216, unpinned(t))
		if err := testutil.BulkTCP(t, l.NS("s"), l.NS("d"), "fc00:4d::d", 0, bulkBytes, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		sts, err := netfilter.List(l.NS("nfv2"))
		if err != nil {
			t.Fatal(err)
		}
		var accepted uint64
		for _, s := range sts {
			accepted += s.Counters.Accepted
			var drops []string
			for k, v := range s.Counters.Drops {
				if v != 0 {
					drops = append(drops, fmt.Sprintf("%s %d", k, v))
				}
			}
			if len(drops) != 0 {
				t.Errorf("End.AN.NF %d dropped: %s", s.ID, strings.Join(drops, ", "))
			}
		}
		if accepted == 0 {
			t.Error("nothing went through End.AN.NF")
		}
	})
}
