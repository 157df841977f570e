package oam

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// A sighting of a previous trace that reaches a reused tap after its
// drain is not the next trace's. The tracepoint tap's programs are pooled
// between traces (rxPool): a program run still in flight when trace A
// releases its tap compared the packet with A's marker, and reports it
// after the drain, into the ring the next trace B reads. Modelled by
// setting A's marker again for one packet of A while B's tap runs: B
// must not see it (each sighting carries the marker it matched, and a
// tap keeps only its own). Fails without that check.
func TestReusedTapDropsLateSightings(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "oamlt")
	send := func(magic uint64, seq uint32) {
		t.Helper()
		err := nsutil.Do(ns, func() error {
			conn, err := net.DialUDP("udp6", nil, &net.UDPAddr{IP: net.IPv6loopback, Port: 33434})
			if err != nil {
				return err
			}
			defer conn.Close()
			p := make([]byte, 16)
			binary.NativeEndian.PutUint64(p, magic)
			binary.NativeEndian.PutUint32(p[8:], seq)
			_, err = conn.Write(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := func(seq uint32) func([]Event) bool {
		return func(evs []Event) bool { return evs[len(evs)-1].Seq == seq && evs[len(evs)-1].Drop == "" }
	}
	const a, b = 0x0a0a0a0a5eed0001, 0x0b0b0b0b5eed0002
	ta, err := AttachRx(map[string]string{"n": ns}, a)
	if err != nil {
		t.Fatal(err)
	}
	send(a, 1)
	if evs, err := ta.Collect(time.Now().Add(30*time.Second), seen(1)); err != nil || len(evs) == 0 {
		t.Fatalf("trace A: %v %+v", err, evs)
	}
	if err := ta.Close(); err != nil {
		t.Fatal(err)
	}
	loads := RxLoads()
	tb, err := AttachRx(map[string]string{"n": ns}, b)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if RxLoads() != loads {
		t.Fatal("trace B loaded a tap of its own: the pooled one was not reused")
	}
	// A's program run, late: it compared with A's marker.
	if err := tb.objs.OamMagic.Set(uint64(a)); err != nil {
		t.Fatal(err)
	}
	send(a, 7)
	if err := tb.objs.OamMagic.Set(uint64(b)); err != nil {
		t.Fatal(err)
	}
	send(b, 2)
	evs, err := tb.Collect(time.Now().Add(30*time.Second), seen(2))
	if err != nil {
		t.Fatal(err)
	}
	var got bool
	for _, e := range evs {
		if e.Seq == 7 {
			t.Errorf("trace B got trace A's late sighting %+v", e)
		}
		got = got || e.Seq == 2
	}
	if !got {
		t.Fatalf("trace B did not see its own probe: %+v", evs)
	}
}
