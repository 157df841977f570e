package boundary

import (
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nodestate"
)

// The spec is parsed once per process (bpfpin.Parsed) and handed out as
// copies: concurrent observers may each change theirs (pinning) without
// touching the others'.
func TestSpecCopies(t *testing.T) {
	var wg sync.WaitGroup
	specs := make([]*ebpf.CollectionSpec, 8)
	for i := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := loader.Spec()
			if err != nil {
				t.Error(err)
				return
			}
			specs[i] = s
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if specs[0] == specs[1] || specs[0].Maps["bnd_lpm"] == specs[1].Maps["bnd_lpm"] {
		t.Fatal("two calls share a spec")
	}
	specs[0].Maps["bnd_lpm"].MaxEntries = 1
	if specs[1].Maps["bnd_lpm"].MaxEntries == 1 {
		t.Fatal("a change to one copy shows in another")
	}
	if specs[1].Maps["bnd_lpm"].Pinning != ebpf.PinByName {
		t.Fatal("maps not pinned by name")
	}
}

// The table read in batches holds what reading it key by key does,
// across more than one batch.
func TestEntriesBatched(t *testing.T) {
	var b nodestate.Boundary
	for i := range 600 {
		b.Locators = append(b.Locators, netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfc, 0, byte(i >> 8), byte(i)}), 64))
	}
	b.External = []netip.Prefix{netip.MustParsePrefix("fc00:2::e:0/112")}
	b.Nodes = []netip.Addr{netip.MustParseAddr("fc00:12::1")}
	n := loadTest(t, b)
	batched, err := n.batchEntries()
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("no batch lookups on LPM tries: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	iterated, err := n.iterEntries()
	if err != nil {
		t.Fatal(err)
	}
	if len(iterated) != 602 {
		t.Fatalf("%d entries, want 602", len(iterated))
	}
	if diff := cmp.Diff(iterated, batched); diff != "" {
		t.Fatalf("batched (-iterated +batched):\n%s", diff)
	}
}
