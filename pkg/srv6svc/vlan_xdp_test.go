package srv6svc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
)

// tagged puts tags (ethertype, VID) after frame's MAC addresses.
func tagged(frame []byte, tags ...[2]uint16) []byte {
	out := append([]byte(nil), frame[:12]...)
	for _, tg := range tags {
		out = binary.BigEndian.AppendUint16(out, tg[0])
		out = binary.BigEndian.AppendUint16(out, 5<<13|tg[1]) // priority 5
	}
	return append(out, frame[12:]...)
}

// TestXDPVLANTags runs srv6svc_xdp (BPF_PROG_TEST_RUN) on tagged frames,
// the SID bound with on-failure bypass and no socket (so a frame the
// program takes for the SID's passes, counted nosock_bypass). Behind
// priority tags only (VID 0, 802.1Q or 802.1ad, any number), a bound SID's
// frame is the kernel's IPv6 to the SID: taken, tags removed (the output
// is the untagged frame). Anything else passes unchanged and uncounted: a
// VLAN ID anywhere (the VLAN device's or another host's), another
// destination, another protocol, a frame cut inside its tags.
func TestXDPVLANTags(t *testing.T) {
	objs := loadSteerObjs(t)
	key := steerXDPSvcKey{Prefixlen: 128, Addr: s1.As16()}
	if err := objs.SvcSids.Put(&key, &steerXDPSvcVal{Slot: 5, Flags: 1, MaxLen: 9000}); err != nil {
		t.Fatal(err)
	}
	stats := func(t *testing.T) steerXDPSvcStats {
		var per []steerXDPSvcStats
		if err := objs.SvcCounters.Lookup(uint32(5), &per); err != nil {
			t.Fatal(err)
		}
		var s steerXDPSvcStats
		for _, p := range per {
			s.Malformed += p.Malformed
			s.NosockBypass += p.NosockBypass
		}
		return s
	}
	const (
		xdpDrop, xdpPass = 1, 2
		q, ad            = 0x8100, 0x88a8
	)
	plain := steerCases(t)[0].frame
	other := append([]byte(nil), plain...)
	other[ethLen+ipv6Len-1] ^= 0xff // another destination
	bad := append([]byte(nil), plain...)
	bad[ethLen+ipv6Len+3] = 0 // Segments Left 0: malformed
	arp := append(append([]byte(nil), plain[:12]...), 0x08, 0x06)
	arp = append(arp, plain[14:]...)
	var many [][2]uint16
	for i := 0; i < 40; i++ {
		many = append(many, [2]uint16{q, 0})
	}
	for _, c := range []struct {
		name      string
		frame     []byte
		ret       uint32
		out       []byte // the frame as the program leaves it
		bypass    uint64
		malformed uint64
	}{
		{"802.1Q priority tag", tagged(plain, [2]uint16{q, 0}), xdpPass, plain, 1, 0},
		{"802.1ad priority tag", tagged(plain, [2]uint16{ad, 0}), xdpPass, plain, 1, 0},
		{"802.1ad, 802.1Q priority tags", tagged(plain, [2]uint16{ad, 0}, [2]uint16{q, 0}), xdpPass, plain, 1, 0},
		{"40 priority tags", tagged(plain, many...), xdpPass, plain, 1, 0},
		{"priority tag, malformed SRH", tagged(bad, [2]uint16{q, 0}), xdpDrop, nil, 0, 1},
		{"VID 100", tagged(plain, [2]uint16{q, 100}), xdpPass, tagged(plain, [2]uint16{q, 100}), 0, 0},
		{"802.1ad VID 100", tagged(plain, [2]uint16{ad, 100}), xdpPass, tagged(plain, [2]uint16{ad, 100}), 0, 0},
		{"priority tag, then VID 5", tagged(plain, [2]uint16{ad, 0}, [2]uint16{q, 5}), xdpPass, tagged(plain, [2]uint16{ad, 0}, [2]uint16{q, 5}), 0, 0},
		{"VID 5, then a priority tag", tagged(plain, [2]uint16{ad, 5}, [2]uint16{q, 0}), xdpPass, tagged(plain, [2]uint16{ad, 5}, [2]uint16{q, 0}), 0, 0},
		{"priority tag, another destination", tagged(other, [2]uint16{q, 0}), xdpPass, tagged(other, [2]uint16{q, 0}), 0, 0},
		{"priority tag, ARP", tagged(arp, [2]uint16{q, 0}), xdpPass, tagged(arp, [2]uint16{q, 0}), 0, 0},
		{"cut inside the second tag", tagged(plain, [2]uint16{q, 0}, [2]uint16{q, 0})[:17], xdpPass, tagged(plain, [2]uint16{q, 0}, [2]uint16{q, 0})[:17], 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := stats(t)
			opts := &ebpf.RunOptions{Data: c.frame, DataOut: make([]byte, len(c.frame)+256)}
			ret, err := objs.Srv6svcXdp.Run(opts)
			if err != nil {
				t.Fatal(err)
			}
			after := stats(t)
			if ret != c.ret || after.NosockBypass-before.NosockBypass != c.bypass || after.Malformed-before.Malformed != c.malformed {
				t.Errorf("action %d, nosock_bypass +%d, malformed +%d; want %d, +%d, +%d", ret, after.NosockBypass-before.NosockBypass,
					after.Malformed-before.Malformed, c.ret, c.bypass, c.malformed)
			}
			if c.out != nil && !bytes.Equal(opts.DataOut, c.out) {
				t.Errorf("frame out:\n%x\nwant\n%x", opts.DataOut, c.out)
			}
		})
	}
}
