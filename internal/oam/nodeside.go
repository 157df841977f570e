package oam

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// What a node's agent does for a trace through agents (internal/oam/oamsvc
// serves it): the tap (AttachRx for its own namespace), the probe's
// injection and the node's IP statistics.

// NodeStats reads the kernel IP statistics of namespace ns ("": the
// caller's).
func NodeStats(ns string) (map[string]uint64, error) {
	m := map[string]uint64{}
	if err := nsutil.Do(ns, func() error { return readSNMP(m) }); err != nil {
		return nil, err
	}
	return m, nil
}

// xdpMD is struct xdp_md, the context of an XDP test run.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

var (
	passOnce sync.Once
	passProg *ebpf.Program
	passErr  error
)

// xdpPass is an XDP program that passes every frame: run in live-frame
// mode (BPF_F_TEST_XDP_LIVE_FRAMES) it hands the frame to the stack of
// the interface its context names, through netif_receive_skb.
func xdpPass() (*ebpf.Program, error) {
	passOnce.Do(func() {
		passProg, passErr = ebpf.NewProgram(&ebpf.ProgramSpec{
			Name: "oam_inject", Type: ebpf.XDP, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()},
		})
	})
	return passProg, passErr
}

// InjectRx hands packet (IPv6 or IPv4, no link header) to the stack of
// namespace ns ("": the caller's) as if it had arrived on iface: the
// headend classifies and encapsulates it as it does its hosts' traffic,
// without a host on the link sending it.
func InjectRx(ns, iface string, packet []byte) error {
	if len(packet) < 20 || len(packet) > 1500 {
		return fmt.Errorf("packet of %d bytes: want 20..1500", len(packet))
	}
	et := uint16(unix.ETH_P_IPV6)
	switch packet[0] >> 4 {
	case 6:
	case 4:
		et = unix.ETH_P_IP
	default:
		return errors.New("packet is neither IPv6 nor IPv4")
	}
	prog, err := xdpPass()
	if err != nil {
		return fmt.Errorf("load the injecting XDP program: %w", err)
	}
	return nsutil.Do(ns, func() error {
		ifc, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		if len(ifc.HardwareAddr) != 6 {
			return fmt.Errorf("interface %s has no Ethernet address", iface)
		}
		// To the interface's own address (the stack takes it as for this
		// host), from a locally administered one.
		frame := make([]byte, 14+len(packet))
		copy(frame, ifc.HardwareAddr)
		copy(frame[6:], []byte{0x02, 0x53, 0x43, 0x4f, 0x41, 0x4d})
		frame[12], frame[13] = byte(et>>8), byte(et)
		copy(frame[14:], packet)
		// The ifindex is resolved in the calling thread's namespace:
		// nsutil.Do holds this thread there.
		// (Live-frame mode reports no return value.)
		_, err = prog.Run(&ebpf.RunOptions{Data: frame, Repeat: 1, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES,
			Context: xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifc.Index)}})
		if err != nil {
			return fmt.Errorf("inject on %s (XDP live frame): %w", iface, err)
		}
		return nil
	})
}
