package poolperf

import (
	"fmt"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/pool/datapath"
)

// farByDst counts, in an nft table of the SUT's POSTROUTING, the packets
// leaving the kernel's encap for each of recipe k's far addresses 1
// (the placeholder) and 3..5 (the instances); the returned function reads
// the counts as far1, far3, far4, far5. POSTROUTING is before pool_out at
// TCX egress could rewrite a packet: what it sees is what the route chose.
func farByDst(t *testing.T, env *perf.Env, table string, k int) func() map[string]int {
	t.Helper()
	nft := func(args ...string) string {
		t.Helper()
		out, err := env.Run(append([]string{"nft"}, args...)...)
		if err != nil {
			t.Fatalf("nft %v: %v: %s", args, err, out)
		}
		return out
	}
	nft("add", "table", "ip6", table)
	nft("add", "chain", "ip6", table, "post", "{ type filter hook postrouting priority 0 ; }")
	for _, n := range []int{1, 3, 4, 5} {
		nft("add", "rule", "ip6", table, "post", "ip6", "daddr", perf.Addr("far", k, n).String(), "counter", "comment", fmt.Sprintf("\"far%d\"", n))
	}
	return func() map[string]int {
		counts := map[string]int{}
		for _, line := range strings.Split(nft("list", "chain", "ip6", table, "post"), "\n") {
			var n int
			if j := strings.Index(line, "packets "); j >= 0 {
				fmt.Sscanf(line[j:], "packets %d", &n)
				for _, f := range []string{"far1", "far3", "far4", "far5"} {
					if strings.Contains(line, "\""+f+"\"") {
						counts[f] = n
					}
				}
			}
		}
		return counts
	}
}

// poolPackets is how many packets pool id (of n instances) sent to its
// instances on the SUT.
func poolPackets(t *testing.T, env *perf.Env, id, n int) (sum uint64) {
	t.Helper()
	err := env.Do(func() error {
		h, err := datapath.Reopen("")
		if err != nil {
			return err
		}
		defer h.Close()
		s, err := h.Stats(id, n)
		for _, v := range s.Instances {
			sum += v
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}
