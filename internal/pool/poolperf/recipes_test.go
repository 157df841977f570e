package poolperf

import (
	"net/netip"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/perf/perftest"
	"github.com/segchain/segchain/internal/testutil"
)

// TestArmsSelectInOneRun sets pool arms up in one SUT, as `perf run`
// does (two T.Encaps.pool arms and a single-instance chain), and sends
// each pool arm's frames: every arm's pool must count them. Before
// session 11 each arm programmed only its own pool, which removed the
// arms set up before it: in the three-arm runs the pool arm went out
// unselected, as the control did.
func TestArmsSelectInOneRun(t *testing.T) {
	d := perftest.Testbed(t, "s11pl")
	env := d.Env()
	arms := []struct {
		name string
		kind int
		n    int // instances
	}{
		{"T.Encaps.pool", poolIn, 3},
		{"T.Encaps.pool (second arm)", poolIn, 3},
		{"T.Encaps.rule", ruleOnly, 0},
	}
	// The single-instance chain is set up (last, as in the experiment
	// file) but not sent: it has no pool.
	gen := d.Generator()
	for i, a := range arms {
		f, err := setupKind(env, i+2, perf.Params{Size: 64}, a.kind)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		if err := gen.Load(i, f); err != nil {
			t.Fatal(err)
		}
	}
	// The forwarding sink (a TCX program on the SUT's out port that
	// drops) goes after the selector, as `perf run` re-attaches it after
	// the recipes' setup: attached first it would end the chain.
	if err := d.Sink(perf.SinkForward); err != nil {
		t.Fatal(err)
	}
	if err := gen.SetRate(2000); err != nil {
		t.Fatal(err)
	}
	// The ingress arm's packets must leave the kernel's encap with an
	// instance's SID as their destination (an nft counter in
	// POSTROUTING, before pool_out at TCX egress could rewrite them), none
	// with the placeholder's: chosen at ingress, not by pool_out.
	k0 := 2
	byDst := farByDst(t, env, "s12pool", k0)
	for i, a := range arms[:2] {
		if err := gen.Select(i); err != nil {
			t.Fatal(err)
		}
		if err := gen.Start(); err != nil {
			t.Fatal(err)
		}
		// The pools are programmed in arm order: arm i's pool is id i.
		deadline := time.Now().Add(10 * time.Second)
		for poolPackets(t, env, i, a.n) == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if err := gen.Stop(); err != nil {
			t.Fatal(err)
		}
		if poolPackets(t, env, i, a.n) == 0 {
			t.Errorf("%s: its pool (id %d) counted none of its packets in 10 s: the arm went out unselected", a.name, i)
		}
		if i == 0 {
			counts := byDst()
			if counts["far1"] != 0 || counts["far3"]+counts["far4"]+counts["far5"] == 0 {
				t.Errorf("%s: packets leaving the encap by destination %v: want only instances (far3..5), none to the placeholder far1", a.name, counts)
			}
		}
	}
}

// The arms' frame carries a UDP checksum tshark finds good (the frame is
// T.Encaps's, so the arms differ from it by the selector alone).
func TestFrameChecksum(t *testing.T) {
	env := &perf.Env{InMAC: []byte{2, 0, 0, 0, 0, 1}, TxMAC: []byte{2, 0, 0, 0, 0, 2}}
	var frames [][]byte
	for _, size := range []int{48, 64, 65, 512} {
		b, err := frame(env, netip.MustParseAddr("fc00:4::d6"), size)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b)
	}
	testutil.VerifyChecksums(t, frames, []string{"48", "64", "65", "512"}, "udp.checksum.status")
}
