package srunaware

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// testRunCtx is BPF_PROG_TEST_RUN with a context and repeat n, returning
// the kernel's mean duration per run: ebpf.Program.Benchmark takes no
// context, and the ingress ifindex in it picks the proxy's half.
func testRunCtx(p *ebpf.Program, pkt []byte, ctx testutil.SkbCtx, n int) (uint32, time.Duration, error) {
	var attr struct {
		progFD, retval, dataSizeIn, dataSizeOut uint32
		dataIn, dataOut                         uint64
		repeat, duration, ctxSizeIn, ctxSizeOut uint32
		ctxIn, ctxOut                           uint64
		flags, cpu, batchSize, _                uint32
	}
	attr.progFD = uint32(p.FD())
	attr.dataSizeIn = uint32(len(pkt))
	attr.dataIn = uint64(uintptr(unsafe.Pointer(&pkt[0])))
	attr.repeat = uint32(n)
	attr.ctxSizeIn = uint32(unsafe.Sizeof(ctx))
	attr.ctxIn = uint64(uintptr(unsafe.Pointer(&ctx)))
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		runtime.KeepAlive(pkt)
		runtime.KeepAlive(&ctx)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, 0, errno
		}
		return attr.retval, time.Duration(attr.duration), nil
	}
}

// BenchmarkProgCost reports the proxy program's cost per packet
// (BPF_PROG_TEST_RUN overhead included) on paths that do not rewrite the
// packet, so every repetition sees the same input: inbound End.AD up to
// the hop-limit drop (extension-header walk, cache scratch, SRH checks),
// outbound End.AS up to the FIB's too-big answer for an IPv4 packet
// without DF (cache lookup, bounds, FIB lookup), and a packet that is not
// the proxy's (one hash miss: the floor). Run
//
//	go test -run '^$' -bench ProgCost ./internal/dataplane/srunaware
func BenchmarkProgCost(b *testing.B) {
	tn := newTestNode(b)
	list := []netip.Addr{sidEg, sidNx, sidPx, sidIn}
	tn.seed(b, []sidConf{
		{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true},
		{sid: "fc00:2::a5", behavior: EndAS, inner: InnerIPv4, mac: true, asSrc: "fc00:2::5", asSegs: []string{sidNx.String(), sidEg.String()}},
	})
	// The End.AS SID's IFACE-IN is sfb for both SIDs in seed; the last
	// one written (End.AS) owns it.
	for _, c := range []struct {
		name string
		iif  uint32
		pkt  []byte
		want Verdict
	}{
		{"inbound-ad-hoplimit", tn.pa, eth(macNode, macPeer, 0x86dd, ip6(sidIn, sidPx, 43, 1, srh(41, list, 2, 0, nil, inner6))), VerdictDrop},
		{"outbound-as-mtu", tn.sfb, eth(macSFOut, macSF, 0x0800, noDF(big4)), VerdictDrop},
		{"foreign", tn.pa, srPkt([]netip.Addr{sidEg, sidNx}, 1, 41, nil, inner6), VerdictNext},
	} {
		b.Run(c.name, func(b *testing.B) {
			var d time.Duration
			err := nsutil.Do(tn.ns, func() error {
				ret, dur, err := testRunCtx(tn.objs.ProxyTc, c.pkt, testutil.SkbCtx{IngressIfindex: c.iif, Ifindex: c.iif}, b.N)
				if err == nil && Verdict(int32(ret)) != c.want {
					return fmt.Errorf("verdict %d, want %d", int32(ret), c.want)
				}
				d = dur
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d.Nanoseconds()), "ns/pkt")
		})
	}
}
