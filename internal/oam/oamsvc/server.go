// Package oamsvc is segchain trace through agents: the OAM gRPC service
// (proto/segchain/oam/v1/oam.proto) an agent serves for its node next to
// the agent service, on the same mutual-TLS server, and the client a
// trace uses to reach it (an oam.Remote).
package oamsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/segchain/segchain/internal/oam"
	pb "github.com/segchain/segchain/internal/oam/oampb"
)

// Bounds of what a caller may ask of a node.
const (
	DefaultTap = 10 * time.Second
	MaxTap     = 60 * time.Second
	// MaxTaps is how many taps may run at once on a node (each is a
	// tracing program and a ring buffer).
	MaxTaps = 4
)

// Server is a node's OAM service.
type Server struct {
	pb.UnimplementedOAMServer
	node, netns string

	mu   sync.Mutex
	taps int
	live map[uint64]*oam.RxTap    // the running taps by magic (Flush)
	runs map[string]chan struct{} // the endable Sample runs by name (EndSample)

	keep *oam.Keeper // what apply keeps running (keep.go)
	// keeps counts the Keep calls served (tests).
	keeps atomic.Int64
}

// New serves node, whose network namespace is netns ("": the agent's
// own).
func New(node, netns string) *Server {
	s := &Server{node: node, netns: netns}
	s.keep = oam.NewKeeper(node, s.ns())
	return s
}

// Register adds the OAM service of node (namespace netns) to g.
// The tap is loaded now, in the background, so that a trace only attaches
// it (an error here is met again, and reported, by the first trace):
// once per process, however many nodes it serves. An agent group of 25
// nodes loaded it 25 times at once (each saw the pool empty), parsing
// the kernel's BTF each time: at 1,000 nodes that was most of the
// agents' CPU while the first apply ran (docs/scale.md).
func Register(g *grpc.Server, node, netns string) *Server {
	s := New(node, netns)
	pb.RegisterOAMServer(g, s)
	prewarmOnce.Do(func() {
		prewarms.Add(1)
		go func() {
			_ = prewarm()
			// Loading parsed the kernel's BTF (megabytes of types),
			// garbage now: hand it back to the system instead of keeping
			// it in the agent's resident set (issue #33's ≤ 10 MiB per
			// agent).
			debug.FreeOSMemory()
		}()
	})
	return s
}

var (
	prewarmOnce sync.Once
	prewarm     = oam.PrewarmRx // tests count the calls
	prewarms    atomic.Int64
)

// Netns is the namespace the service works in (ns).
func (s *Server) Netns() string { return s.ns() }

// ns is the namespace the tap and the injection work in: the named one,
// or the agent's own (a path, so that AttachRx reads its inode).
func (s *Server) ns() string {
	if s.netns != "" {
		return s.netns
	}
	return "/proc/self/ns/net"
}

// Tap implements pb.OAMServer.
func (s *Server) Tap(req *pb.TapRequest, st pb.OAM_TapServer) error {
	if req.GetMagic() == 0 {
		return status.Error(codes.InvalidArgument, "magic: must not be 0")
	}
	d := time.Duration(req.GetMaxMs()) * time.Millisecond
	switch {
	case d == 0:
		d = DefaultTap
	case d > MaxTap:
		return status.Errorf(codes.InvalidArgument, "max_ms %d: at most %d", req.GetMaxMs(), MaxTap.Milliseconds())
	}
	s.mu.Lock()
	if s.taps >= MaxTaps {
		s.mu.Unlock()
		return status.Errorf(codes.ResourceExhausted, "node %s runs %d taps already", s.node, MaxTaps)
	}
	s.taps++
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.taps--; s.mu.Unlock() }()

	t, err := oam.AttachRx(map[string]string{s.node: s.ns()}, req.GetMagic())
	if err != nil {
		return status.Errorf(codes.Internal, "node %s: %v", s.node, err)
	}
	s.mu.Lock()
	if s.live[req.GetMagic()] != nil {
		s.mu.Unlock()
		t.Close()
		return status.Errorf(codes.AlreadyExists, "node %s: a tap of this magic runs already", s.node)
	}
	if s.live == nil {
		s.live = map[uint64]*oam.RxTap{}
	}
	s.live[req.GetMagic()] = t
	s.mu.Unlock()
	defer func() { s.mu.Lock(); delete(s.live, req.GetMagic()); s.mu.Unlock() }()
	var once sync.Once
	closeTap := func() { once.Do(func() { t.Close() }) }
	defer closeTap()
	// The caller ending the stream ends the tap's read at once.
	stop := context.AfterFunc(st.Context(), closeTap)
	defer stop()
	if err := st.Send(&pb.TapEvent{Ready: true, Node: s.node, ClockOffsetNs: int64(oam.ClockOffset()), BootId: oam.BootID()}); err != nil {
		return err
	}
	var serr error
	_, err = t.Collect(time.Now().Add(d), func(evs []oam.Event) bool {
		e := evs[len(evs)-1]
		serr = st.Send(&pb.TapEvent{Node: s.node, AtNs: uint64(e.At), Iface: e.Point.Iface, Seq: e.Seq, Da: daBytes(e.DA),
			Srh: e.SRH, Sl: uint32(e.SL), Encap: e.Encap, Len: e.Len, Drop: e.Drop})
		return serr != nil
	})
	if serr != nil {
		return serr
	}
	if err != nil && st.Context().Err() == nil {
		return status.Errorf(codes.Internal, "node %s: %v", s.node, err)
	}
	return nil
}

// Flush implements pb.OAMServer: the tap of magic sends what its ring
// buffer holds, then its stream ends.
func (s *Server) Flush(_ context.Context, req *pb.FlushRequest) (*pb.FlushReply, error) {
	s.mu.Lock()
	t := s.live[req.GetMagic()]
	s.mu.Unlock()
	if t == nil {
		return &pb.FlushReply{}, nil
	}
	t.Flush()
	return &pb.FlushReply{Found: true}, nil
}

func daBytes(ip net.IP) []byte {
	if v4 := ip.To4(); v4 != nil && len(ip) == 4 {
		return v4
	}
	return ip.To16()
}

// Inject implements pb.OAMServer.
func (s *Server) Inject(_ context.Context, req *pb.InjectRequest) (*pb.InjectReply, error) {
	if req.GetIface() == "" {
		return nil, status.Error(codes.InvalidArgument, "iface: empty")
	}
	if err := oam.InjectRx(s.ns(), req.GetIface(), req.GetPacket()); err != nil {
		var ne *net.OpError
		if errors.As(err, &ne) {
			return nil, status.Errorf(codes.NotFound, "node %s: %v", s.node, err)
		}
		return nil, status.Errorf(codes.InvalidArgument, "node %s: %v", s.node, err)
	}
	return &pb.InjectReply{}, nil
}

// Stats implements pb.OAMServer.
func (s *Server) Stats(context.Context, *pb.StatsRequest) (*pb.StatsReply, error) {
	m, err := oam.NodeStats(s.ns())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "node %s: %v", s.node, fmt.Errorf("read IP statistics: %w", err))
	}
	return &pb.StatsReply{Node: s.node, Counters: m}, nil
}

// EndSample implements pb.OAMServer.
func (s *Server) EndSample(_ context.Context, req *pb.EndSampleRequest) (*pb.EndSampleReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ended, ok := s.runs[req.GetRun()]
	if ok {
		close(ended)
		delete(s.runs, req.GetRun())
	}
	return &pb.EndSampleReply{Found: ok}, nil
}

// MaxSample bounds a sampling run on a node.
const MaxSample = 10 * time.Minute

// Sample implements pb.OAMServer.
func (s *Server) Sample(req *pb.SampleRequest, st pb.OAM_SampleServer) error {
	if len(req.GetFirstSid()) != 16 || len(req.GetLastSid()) != 16 {
		return status.Error(codes.InvalidArgument, "first_sid, last_sid: 16 bytes each")
	}
	d := time.Duration(req.GetDurationMs()) * time.Millisecond
	if d <= 0 || d > MaxSample {
		return status.Errorf(codes.InvalidArgument, "duration_ms %d: 1..%d", req.GetDurationMs(), MaxSample.Milliseconds())
	}
	s.mu.Lock()
	if s.taps >= MaxTaps {
		s.mu.Unlock()
		return status.Errorf(codes.ResourceExhausted, "node %s runs %d taps already", s.node, MaxTaps)
	}
	s.taps++
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.taps--; s.mu.Unlock() }()

	// A named run goes on until EndSample (at most MaxSample): the
	// controller ends a segment node's run after the headend's marking
	// ended, however late the headend started.
	var ended chan struct{}
	if run := req.GetRun(); run != "" {
		ended = make(chan struct{})
		s.mu.Lock()
		if _, dup := s.runs[run]; dup {
			s.mu.Unlock()
			return status.Errorf(codes.AlreadyExists, "node %s: sample run %q goes on already", s.node, run)
		}
		if s.runs == nil {
			s.runs = map[string]chan struct{}{}
		}
		s.runs[run] = ended
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			if s.runs[run] == ended {
				delete(s.runs, run)
			}
			s.mu.Unlock()
		}()
		d = MaxSample
	}

	var key oam.ChainKey
	copy(key.First[:], req.GetFirstSid())
	copy(key.Last[:], req.GetLastSid())
	sm, err := oam.StartSampler(map[string]string{s.node: s.ns()}, s.node, s.ns(), key, req.GetRate())
	if err != nil {
		return status.Errorf(codes.Internal, "node %s: %v", s.node, err)
	}
	if err := st.Send(&pb.SampleEvent{Ready: true, ClockOffsetNs: int64(oam.ClockOffset()), BootId: oam.BootID(), Endable: ended != nil}); err != nil {
		sm.Stop()
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ended: // nil (never) for an unnamed run
	case <-st.Context().Done():
	}
	evs, counts, err := sm.Stop()
	if err != nil {
		return status.Errorf(codes.Internal, "node %s: %v", s.node, err)
	}
	if err := st.Context().Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	for _, e := range evs {
		if err := st.Send(&pb.SampleEvent{AtNs: uint64(e.At), Kind: uint32(e.Kind), Da: e.DA[:], Id: e.ID[:], Sl: uint32(e.SL)}); err != nil {
			return err
		}
	}
	return st.Send(&pb.SampleEvent{Done: true, Seen: counts.Seen, Marked: counts.Marked, Hmac: counts.HMAC})
}
