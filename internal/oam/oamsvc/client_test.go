package oamsvc

import (
	"context"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/segchain/segchain/internal/oam"
	pb "github.com/segchain/segchain/internal/oam/oampb"
)

// fakeNode is a node's OAM service that reports what it is told: its
// kernel's boot id, a clock offset, then its sightings (kernel ns).
type fakeNode struct {
	pb.UnimplementedOAMServer
	boot   string
	offset time.Duration
	at     []uint64
}

func (f *fakeNode) Tap(_ *pb.TapRequest, st pb.OAM_TapServer) error {
	if err := st.Send(&pb.TapEvent{Ready: true, BootId: f.boot, ClockOffsetNs: int64(f.offset)}); err != nil {
		return err
	}
	for _, at := range f.at {
		if err := st.Send(&pb.TapEvent{AtNs: at, Iface: "eth0"}); err != nil {
			return err
		}
	}
	<-st.Context().Done()
	return nil
}

// dialFakes serves each node's fake on an in-memory listener.
func dialFakes(t *testing.T, nodes map[string]pb.OAMServer) *Client {
	t.Helper()
	conns := map[string]grpc.ClientConnInterface{}
	for n, f := range nodes {
		lis := bufconn.Listen(1 << 16)
		g := grpc.NewServer()
		pb.RegisterOAMServer(g, f)
		go g.Serve(lis)
		t.Cleanup(g.Stop)
		cc, err := grpc.NewClient("passthrough:///"+n, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		conns[n] = cc
	}
	return NewClient(conns)
}

// Agents on one kernel (a lab's) report clock offsets that differ by a
// preemption inside their measurement; their sightings must keep the
// kernel's order all the same: one offset per boot id. Here a's offset
// is measured 1 ms too high, which put its hop (1 µs before b's in the
// kernel) after b's and made the trace through agents name a hop that
// had been left as "did not leave" (CI, under load).
func TestTapOneKernelOneOffset(t *testing.T) {
	const wall = time.Duration(1_700_000_000) * time.Second
	c := dialFakes(t, map[string]pb.OAMServer{
		"a": &fakeNode{boot: "k1", offset: wall + time.Millisecond, at: []uint64{1000}},
		"b": &fakeNode{boot: "k1", offset: wall, at: []uint64{2000}},
		// Another machine: its own offset, whatever it is.
		"c": &fakeNode{boot: "k2", offset: wall - time.Second, at: []uint64{uint64(time.Second + 10*time.Millisecond)}},
	})
	for i := 0; i < 5; i++ { // the streams get ready in any order
		tap, err := c.Tap(context.Background(), []string{"a", "b", "c"}, 1, time.Second, oam.NewTimeline())
		if err != nil {
			t.Fatal(err)
		}
		evs, err := tap.Collect(time.Now().Add(10*time.Second), func(evs []oam.Event) bool { return len(evs) == 3 })
		tap.Close()
		if err != nil || len(evs) != 3 {
			t.Fatalf("%d events (%v), want 3", len(evs), err)
		}
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].At < evs[j].At })
		var order []string
		for _, e := range evs {
			order = append(order, e.Point.Node)
		}
		if order[0] != "a" || order[1] != "b" || evs[1].At-evs[0].At != 1000 {
			t.Fatalf("order %v, a→b %v: want a then b 1 µs apart (one kernel, one offset)", order, evs[1].At-evs[0].At)
		}
		if want := wall + 10*time.Millisecond; evs[2].Point.Node != "c" || evs[2].At != want {
			t.Fatalf("c at %v, want %v (its own offset)", evs[2].At, want)
		}
	}
}

// flushNode holds its sightings until the trace flushes its tap (an
// agent whose ring buffer still holds them when the probe reaches the
// last hop); then it sends them and ends its stream, as Server does.
type flushNode struct {
	pb.UnimplementedOAMServer
	at      []uint64
	once    sync.Once
	flushed chan struct{}
}

func (f *flushNode) Tap(_ *pb.TapRequest, st pb.OAM_TapServer) error {
	if err := st.Send(&pb.TapEvent{Ready: true, BootId: "k1"}); err != nil {
		return err
	}
	select {
	case <-f.flushed:
	case <-st.Context().Done():
		return nil
	}
	for _, at := range f.at {
		if err := st.Send(&pb.TapEvent{AtNs: at}); err != nil {
			return err
		}
	}
	return nil
}

func (f *flushNode) Flush(context.Context, *pb.FlushRequest) (*pb.FlushReply, error) {
	f.once.Do(func() { close(f.flushed) })
	return &pb.FlushReply{Found: true}, nil
}

// oldNode is an agent without Flush: it never ends its stream itself.
type oldNode struct{ pb.UnimplementedOAMServer }

func (oldNode) Tap(_ *pb.TapRequest, st pb.OAM_TapServer) error {
	if err := st.Send(&pb.TapEvent{Ready: true, BootId: "k1"}); err != nil {
		return err
	}
	<-st.Context().Done()
	return nil
}

// After Flush, Collect returns once every agent has sent what it held
// and ended its stream; an agent without the Flush RPC is read for the
// grace period, then its stream is cancelled (no error: the older build's
// behaviour).
func TestTapFlushEndsStreams(t *testing.T) {
	for i := 0; i < 3; i++ {
		c := dialFakes(t, map[string]pb.OAMServer{
			"egress": &flushNode{at: []uint64{2000, 2500}, flushed: make(chan struct{})},
			"d":      &flushNode{at: []uint64{3000}, flushed: make(chan struct{})},
			"old":    oldNode{},
		})
		tap, err := c.Tap(context.Background(), []string{"egress", "d", "old"}, 1, time.Minute, oam.NewTimeline())
		if err != nil {
			t.Fatal(err)
		}
		tap.(oam.Flusher).Flush()
		evs, err := tap.Collect(time.Now().Add(time.Minute), nil)
		tap.Close()
		if err != nil || len(evs) != 3 {
			t.Fatalf("%d sightings (%v), want 3: every held one", len(evs), err)
		}
	}
}
