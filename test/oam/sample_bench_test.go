package oam_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/oam"
)

// TestSampleOverheadBench measures what O-flag sampling at 1:1000 costs
// the web chain's throughput (scripts/sample-bench.sh runs it): rounds
// of four arms in rotating order, each a one-second blast of 64-byte UDP
// datagrams sent by s to the headend as fast as one thread can (an
// AF_PACKET socket: each send runs the whole chain in its softirq on
// the sender's CPU, so the rate is the chain's cost per packet), the
// throughput the rate d received them at: off,
// on (marker + tap attached, 1 in 1000 marked), off again (the A/A
// control), and the marker alone (no tap: splits the cost). It reports the median ratios on/off and off/off of the
// throughput and of the sender's CPU time per packet. Figures only;
// nothing is asserted on them. Opt-in (SEGCHAIN_SAMPLE_BENCH=1): a benchmark,
// not a test of the suite.
func TestSampleOverheadBench(b *testing.T) {
	if os.Getenv("SEGCHAIN_SAMPLE_BENCH") == "" {
		b.Skip("a benchmark: run scripts/sample-bench.sh (SEGCHAIN_SAMPLE_BENCH=1)")
	}
	e := setup(b, "../../examples/default.yaml", nil)
	ingress, _ := e.lab.Netns("ingress")
	sns, _ := e.lab.Netns("s")
	dns, _ := e.lab.Netns("d")
	rounds, dur := 10, time.Second
	if v, err := strconv.Atoi(os.Getenv("OAM_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	mac := func(ns, ifn string) net.HardwareAddr {
		var hw net.HardwareAddr
		if err := nsutil.Do(ns, func() error {
			ifc, err := net.InterfaceByName(ifn)
			if err == nil {
				hw = ifc.HardwareAddr
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return hw
	}
	eth := &layers.Ethernet{SrcMAC: mac(sns, "eth-ingress"), DstMAC: mac(ingress, "eth-s"), EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
		SrcIP: net.ParseIP("fc00:1a::a"), DstIP: net.ParseIP("fc00:4d::d")}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 7000}
	_ = udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(make([]byte, 64))); err != nil {
		b.Fatal(err)
	}
	frame := buf.Bytes()
	rx := func() uint64 {
		var n uint64
		if err := nsutil.Do(dns, func() error {
			l, err := netlink.LinkByName("eth-egress")
			if err != nil {
				return err
			}
			n = l.Attrs().Statistics.RxPackets
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		return n
	}
	arm := func(on, markOnly bool) (pps, cpuPerPkt float64, marked uint64) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan *oam.SampleReport, 1)
		if on {
			started := make(chan struct{})
			go func() {
				r, err := oam.Sample(ctx, e.d, "web", oam.SampleOptions{Rate: 1000, Duration: time.Hour, MarkOnly: markOnly, Started: func() { close(started) }})
				if err != nil {
					b.Error(err)
				}
				done <- r
			}()
			<-started
		}
		before, t0 := rx(), time.Now()
		sent, cpu := blast(b, sns, "eth-ingress", frame, dur)
		cpuPerPkt = float64(cpu.Nanoseconds()) / float64(sent)
		el := time.Since(t0)
		time.Sleep(50 * time.Millisecond) // the last datagrams on their way
		got := rx() - before
		pps = float64(got) / el.Seconds()
		b.Logf("on %v: sent %d, d received %d", on, sent, got)
		if on {
			cancel()
			if r := <-done; r != nil {
				marked = r.Marked
			}
		}
		return pps, cpuPerPkt, marked
	}
	var onRatio, aaRatio, onCPU, aaCPU, markCPU []float64
	for r := 0; r < rounds; r++ {
		pps, cpu := map[string]float64{}, map[string]float64{}
		var marked uint64
		for k := 0; k < 4; k++ {
			switch (r + k) % 4 {
			case 0:
				pps["off"], cpu["off"], _ = arm(false, false)
			case 1:
				pps["on"], cpu["on"], marked = arm(true, false)
			case 2:
				pps["off2"], cpu["off2"], _ = arm(false, false)
			case 3:
				pps["mark"], cpu["mark"], _ = arm(true, true)
			}
		}
		onRatio = append(onRatio, pps["on"]/pps["off"])
		aaRatio = append(aaRatio, pps["off2"]/pps["off"])
		onCPU = append(onCPU, cpu["on"]/cpu["off"])
		aaCPU = append(aaCPU, cpu["off2"]/cpu["off"])
		markCPU = append(markCPU, cpu["mark"]/cpu["off"])
		b.Logf("round %d: off %.0f pps %.0f ns/pkt, on %.0f pps %.0f ns/pkt (%d marked), off again %.0f pps %.0f ns/pkt",
			r, pps["off"], cpu["off"], pps["on"], cpu["on"], marked, pps["off2"], cpu["off2"])
	}
	med := func(v []float64) float64 { s := append([]float64(nil), v...); sort.Float64s(s); return s[len(s)/2] }
	fmt.Printf("throughput on/off: median %.4f %v\nthroughput A/A:    median %.4f %v\nCPU/packet on/off: median %.4f %v\nCPU/packet A/A:    median %.4f %v\nCPU/packet marker only/off: median %.4f %v\n",
		med(onRatio), onRatio, med(aaRatio), aaRatio, med(onCPU), onCPU, med(aaCPU), aaCPU, med(markCPU), markCPU)
}

// blast sends frame on iface of ns from one thread for dur and returns
// how many it sent.
// blast also returns the CPU time the sending thread used (user and
// system, getrusage RUSAGE_THREAD): the chain's processing runs in its
// softirq on that thread (this kernel has no IRQ time accounting), so
// per packet it is the chain's cost, whatever the machine's load does to
// the wall clock.
func blast(b *testing.T, ns, iface string, frame []byte, dur time.Duration) (int, time.Duration) {
	sent := 0
	var cpu time.Duration
	err := nsutil.Do(ns, func() error {
		ifc, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6}
		copy(sa.Addr[:], frame[:6])
		var r0, r1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r0)
		defer func() {
			_ = unix.Getrusage(unix.RUSAGE_THREAD, &r1)
			cpu = time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
		}()
		for t0 := time.Now(); time.Since(t0) < dur; {
			for i := 0; i < 64; i++ {
				if err := unix.Sendto(fd, frame, 0, sa); err != nil && err != unix.ENOBUFS {
					return err
				}
				sent++
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return sent, cpu
}
