package oamsvc

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/oam"
	pb "github.com/segchain/segchain/internal/oam/oampb"
	"github.com/segchain/segchain/internal/testutil"
)

// The real service end to end: a probe received (and dropped, no socket)
// in the node's namespace before the trace flushes is in the stream,
// which then ends by itself. The sightings are in the tap's ring buffer
// when Flush comes (the kernel counted the drop, which comes after
// both), whether or not the agent has read them yet.
func TestServerFlushSendsTheRing(t *testing.T) {
	ns := testutil.NewNetns(t, "oamfl")
	c := dialFakes(t, map[string]pb.OAMServer{"n": New("n", ns)})
	const magic = 0x5e9c4a1b2d3f6071
	for i := 0; i < 3; i++ {
		stats := func() uint64 {
			m, err := oam.NodeStats(ns)
			if err != nil {
				t.Fatal(err)
			}
			return m["Udp6NoPorts"]
		}
		n0 := stats()
		tap, err := c.Tap(context.Background(), []string{"n"}, magic, time.Minute, oam.NewTimeline())
		if err != nil {
			t.Fatal(err)
		}
		err = nsutil.Do(ns, func() error {
			conn, err := net.DialUDP("udp6", nil, &net.UDPAddr{IP: net.IPv6loopback, Port: 33434})
			if err != nil {
				return err
			}
			defer conn.Close()
			p := make([]byte, 16)
			binary.NativeEndian.PutUint64(p, magic)
			binary.NativeEndian.PutUint32(p[8:], uint32(i))
			_, err = conn.Write(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); stats() == n0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the kernel did not count the probe's drop")
			}
		}
		tap.(oam.Flusher).Flush()
		evs, err := tap.Collect(time.Now().Add(time.Minute), nil)
		tap.Close()
		if err != nil {
			t.Fatal(err)
		}
		var arrived, dropped bool
		for _, e := range evs {
			if e.Seq != uint32(i) || e.Point.Iface != "lo" {
				t.Errorf("sighting %+v: want seq %d on lo", e, i)
			}
			arrived = arrived || e.Drop == ""
			dropped = dropped || e.Drop == "NO_SOCKET"
		}
		if !arrived || !dropped {
			t.Fatalf("sightings %+v: want the arrival and the NO_SOCKET drop", evs)
		}
	}
}
