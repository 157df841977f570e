package srv6svc

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/bpfpin"
)

// Limits of the steering program (bpf/srv6svc_xdp.bpf.c).
const (
	MaxServices = 64 // bindings per network namespace
	MaxQueues   = 64 // receive queues per interface
)

const (
	pinProgram   = "srv6svc"
	flagBypass   = 1
	fwdFIB       = 1 // SVC_FWD_FIB
	infoUsed     = 1
	infoASM      = 2
	infoBatch    = 4
	xdpPinPrefix = "xdp-"
	tcxPinPrefix = "tcx-"
)

// steer is the namespace's steering program and its pinned maps.
type steer struct {
	dir  string
	objs steerXDPObjects
}

// pinDir is the bpffs directory of netns's steering state.
func pinDir(netns string) (string, error) {
	name, _, err := bpfpin.Namespace(netns)
	if err != nil {
		return "", err
	}
	return bpfpin.Dir(name, pinProgram)
}

// openSteer loads the program, reusing the maps pinned in the namespace's
// directory (or pinning new ones). Call it in the namespace.
func openSteer(dir string) (*steer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pin directory: %w", err)
	}
	s := &steer{dir: dir}
	if err := loadSteerXDPObjects(&s.objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}); err != nil {
		return nil, fmt.Errorf("load XDP steering program: %w", err)
	}
	return s, nil
}

func (s *steer) close() { s.objs.Close() }

// attach makes sure the program runs on ifindex, returning the XDP mode in
// effect ("native" or "generic"). The link is pinned so it outlives the
// process: a dead service's SIDs keep their on-failure policy.
func (s *steer) attach(l netlink.Link) (string, error) {
	ifindex := l.Attrs().Index
	pin := filepath.Join(s.dir, fmt.Sprintf("%s%d", xdpPinPrefix, ifindex))
	if lk, err := link.LoadPinnedLink(pin, nil); err == nil {
		info, ierr := lk.Info()
		lk.Close()
		if ierr == nil && info.XDP() != nil && info.XDP().Ifindex == uint32(ifindex) {
			return xdpMode(ifindex, ""), nil
		}
		os.Remove(pin) // the interface went away; its index was reused
	}
	lk, err := link.AttachXDP(link.XDPOptions{Program: s.objs.Srv6svcXdp, Interface: ifindex, Flags: link.XDPDriverMode})
	reason := ""
	if err != nil {
		// No native XDP here: generic XDP works everywhere and is
		// reported as such, with the reason (never silently).
		reason = nativeRefused(l, err)
		var gerr error
		lk, gerr = link.AttachXDP(link.XDPOptions{Program: s.objs.Srv6svcXdp, Interface: ifindex, Flags: link.XDPGenericMode})
		if gerr != nil {
			return "", fmt.Errorf("attach XDP to ifindex %d: native: %v; generic: %w", ifindex, err, gerr)
		}
	}
	defer lk.Close()
	if err := lk.Pin(pin); err != nil {
		return "", fmt.Errorf("pin XDP link: %w", err)
	}
	return xdpMode(ifindex, reason), nil
}

// nativeRefused says briefly why native XDP could not be attached: on a
// veth whose MTU is above MaxMTU, the kernel wants a multi-buffer program.
func nativeRefused(l netlink.Link, err error) string {
	if l.Type() == "veth" && l.Attrs().MTU > MaxMTU {
		return fmt.Sprintf("mtu%d>%d", l.Attrs().MTU, MaxMTU)
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	if msg := err.Error(); len(msg) <= 24 {
		return msg
	}
	return "driver-refused"
}

// attachTC puts srv6svc_tc on TCX ingress of a binding's loop side (once;
// the link is pinned as tcx-<ifindex>).
func (s *steer) attachTC(ifindex int) error {
	return s.attachTCX(s.objs.Srv6svcTc, fmt.Sprintf("%s%d", tcxPinPrefix, ifindex), ifindex)
}

// fibForward says whether srv6svc_tc forwards the frames sent on the loop
// side loop by FIB itself (svc_fwd) or hands them to the stack.
func (s *steer) fibForward(loop int, on bool) error {
	k := uint32(loop)
	if !on {
		if err := s.objs.SvcFwd.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("svc_fwd entry %d: %w", loop, err)
		}
		return nil
	}
	if err := s.objs.SvcFwd.Put(k, uint32(fwdFIB)); err != nil {
		return fmt.Errorf("svc_fwd entry %d: %w", loop, err)
	}
	return nil
}

// attachTCIn puts srv6svc_tc_in on TCX ingress of an interface a binding
// names (once; pinned as tcx-in-<ifindex>): it hands over the aggregates
// generic XDP cannot (see bpf/srv6svc_xdp.bpf.c).
func (s *steer) attachTCIn(ifindex int) error {
	return s.attachTCX(s.objs.Srv6svcTcIn, fmt.Sprintf("%sin-%d", tcxPinPrefix, ifindex), ifindex)
}

// generic records whether the program runs generic on ifindex; there
// srv6svc_tc_in is attached to hand over GSO aggregates (not on native
// interfaces: it would cost every other packet there a program run).
func (s *steer) generic(ifindex int, generic bool) error {
	k := uint32(ifindex)
	if !generic {
		if err := s.objs.SvcGeneric.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("svc_generic entry %d: %w", ifindex, err)
		}
		return nil
	}
	if err := s.objs.SvcGeneric.Put(k, uint32(1)); err != nil {
		return fmt.Errorf("svc_generic entry %d: %w", ifindex, err)
	}
	return s.attachTCIn(ifindex)
}

func (s *steer) attachTCX(prog *ebpf.Program, name string, ifindex int) error {
	pin := filepath.Join(s.dir, name)
	if lk, err := link.LoadPinnedLink(pin, nil); err == nil {
		info, ierr := lk.Info()
		lk.Close()
		if ierr == nil && info.TCX() != nil && info.TCX().Ifindex == uint32(ifindex) {
			return nil
		}
		os.Remove(pin)
	}
	lk, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return fmt.Errorf("attach TCX %s to ifindex %d: %w", prog, ifindex, err)
	}
	defer lk.Close()
	if err := lk.Pin(pin); err != nil {
		return fmt.Errorf("pin TCX link: %w", err)
	}
	return nil
}

// xdpMode is the XDP mode in effect on ifindex; a generic one says why
// native was not had: reason (the refusal just seen), else what the
// interface's state explains (a reused attachment).
func xdpMode(ifindex int, reason string) string {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil || l.Attrs().Xdp == nil {
		return "unknown"
	}
	switch l.Attrs().Xdp.AttachMode {
	case 1:
		return "native"
	case 2:
		if reason == "" {
			reason = "native-refused"
			if l.Type() == "veth" && l.Attrs().MTU > MaxMTU {
				reason = fmt.Sprintf("mtu%d>%d", l.Attrs().MTU, MaxMTU)
			}
		}
		// No spaces: Mode is a space-separated list of key=value
		// (userspace.Entry and sid show split it on spaces).
		return "generic(" + strings.ReplaceAll(reason, " ", "-") + ")"
	case 3:
		return "offload"
	}
	return "unknown"
}

func sidKey(p netip.Prefix) steerXDPSvcKey {
	return steerXDPSvcKey{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As16()}
}

// sidEntry is one SID of the LPM map.
type sidEntry struct {
	prefix netip.Prefix
	slot   uint32
	flags  uint32
	csid   CSIDFormat
}

func (s *steer) sids() ([]sidEntry, error) {
	return readSIDs(s.objs.SvcSids)
}

func readSIDs(m *ebpf.Map) ([]sidEntry, error) {
	var (
		k   steerXDPSvcKey
		v   steerXDPSvcVal
		out []sidEntry
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		out = append(out, sidEntry{netip.PrefixFrom(netip.AddrFrom16(k.Addr), int(k.Prefixlen)), v.Slot, v.Flags,
			CSIDFormat{LBLen: int(v.CsidLb) * 8, NFLen: int(v.CsidNf) * 8}})
	}
	return out, it.Err()
}

func (s *steer) info(slot uint32) (steerXDPSvcInfo, error) {
	var in steerXDPSvcInfo
	err := s.objs.SvcInfos.Lookup(slot, &in)
	return in, err
}

// chooseSlot picks the slot of a binding: the slot its SIDs already have
// (a service binding again after dying), else the one of the same name,
// else a free one. A SID held by another live process is an error.
func (s *steer) chooseSlot(name string, sids []netip.Prefix) (uint32, error) {
	entries, err := s.sids()
	if err != nil {
		return 0, fmt.Errorf("read SID map: %w", err)
	}
	slot := int64(-1)
	for _, e := range entries {
		for _, p := range sids {
			if e.prefix != p && !e.prefix.Overlaps(p) {
				continue
			}
			in, _ := s.info(e.slot)
			if in.Flags&infoUsed != 0 && alive(in.Pid) && in.Pid != uint32(os.Getpid()) {
				return 0, fmt.Errorf("SID %s is bound by %q (pid %d): %w", e.prefix, cString(in.Name[:]), in.Pid, ErrConflict)
			}
			if e.prefix != p {
				return 0, fmt.Errorf("SID %s overlaps bound SID %s: %w", p, e.prefix, ErrConflict)
			}
			if slot >= 0 && slot != int64(e.slot) {
				return 0, fmt.Errorf("SIDs %v belong to different bindings: %w", sids, ErrConflict)
			}
			slot = int64(e.slot)
		}
	}
	if slot >= 0 {
		return uint32(slot), nil
	}
	free := int64(-1)
	for i := uint32(0); i < MaxServices; i++ {
		in, err := s.info(i)
		if err != nil {
			return 0, err
		}
		if in.Flags&infoUsed == 0 {
			if free < 0 && !slotHasSIDs(entries, i) {
				free = int64(i)
			}
			continue
		}
		if cString(in.Name[:]) == name {
			if alive(in.Pid) && in.Pid != uint32(os.Getpid()) {
				return 0, fmt.Errorf("a service named %q is running (pid %d): %w", name, in.Pid, ErrConflict)
			}
			return i, nil
		}
	}
	if free < 0 {
		return 0, fmt.Errorf("all %d service slots are in use: %w", MaxServices, ErrConflict)
	}
	return uint32(free), nil
}

func slotHasSIDs(entries []sidEntry, slot uint32) bool {
	for _, e := range entries {
		if e.slot == slot {
			return true
		}
	}
	return false
}

func alive(pid uint32) bool {
	if pid == 0 {
		return false
	}
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

func cString(b []int8) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(b[i])
	}
	return string(out)
}

func putCString(dst []int8, s string) {
	for i := range dst {
		dst[i] = 0
	}
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// register writes the binding's SIDs (after its sockets are in the XSKMAP)
// and removes SIDs the slot held before but the new binding lacks.
func (s *steer) register(slot uint32, own, loop int, mac net.HardwareAddr, sids []netip.Prefix, bypass bool, maxLen int, f CSIDFormat) error {
	val := steerXDPSvcVal{Slot: slot, OwnIfindex: uint32(own), LoopIfindex: uint32(loop), MaxLen: uint32(maxLen)}
	if f.ok() {
		val.CsidLb, val.CsidNf = uint8(f.LBLen/8), uint8(f.NFLen/8)
	}
	copy(val.OwnMac[:], mac)
	flags := uint32(0)
	if bypass {
		flags = flagBypass
	}
	val.Flags = flags
	entries, err := s.sids()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range sids {
		k := sidKey(p)
		if err := s.objs.SvcSids.Put(&k, &val); err != nil {
			errs = append(errs, fmt.Errorf("register SID %s: %w", p, err))
		}
	}
	for _, e := range entries {
		if e.slot == slot && !containsPrefix(sids, e.prefix) {
			k := sidKey(e.prefix)
			if err := s.objs.SvcSids.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func containsPrefix(l []netip.Prefix, p netip.Prefix) bool {
	for _, q := range l {
		if q == p {
			return true
		}
	}
	return false
}
