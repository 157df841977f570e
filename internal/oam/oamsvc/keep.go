package oamsvc

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/grpc"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/segchain/segchain/internal/metrics"
	"github.com/segchain/segchain/internal/oam"
	pb "github.com/segchain/segchain/internal/oam/oampb"
)

// The kept OAM of a node (chains[].oam, docs/oam.md "Kept by apply"):
// apply hands each agent the whole set with Keep, status reads the
// sightings with Sightings, the agent's /metrics exports the node's
// counts (Collector).

// Keep implements pb.OAMServer.
func (s *Server) Keep(_ context.Context, req *pb.KeepRequest) (*pb.KeepReply, error) {
	s.keeps.Add(1)
	var set []oam.KeptSample
	for _, k := range req.GetSamples() {
		if len(k.GetFirstSid()) != 16 || len(k.GetLastSid()) != 16 {
			return nil, status.Errorf(codes.InvalidArgument, "chain %q: first_sid, last_sid: 16 bytes each", k.GetChain())
		}
		if k.GetChain() == "" {
			return nil, status.Error(codes.InvalidArgument, "samples[].chain: empty")
		}
		ks := oam.KeptSample{Chain: k.GetChain(), Rate: k.GetRate(), Tap: k.GetTap()}
		copy(ks.Key.First[:], k.GetFirstSid())
		copy(ks.Key.Last[:], k.GetLastSid())
		for _, b := range k.GetSids() {
			a, ok := netip.AddrFromSlice(b)
			if !ok || !a.Is6() {
				return nil, status.Errorf(codes.InvalidArgument, "chain %q: sids: %d bytes, want 16", k.GetChain(), len(b))
			}
			ks.SIDs = append(ks.SIDs, a)
		}
		set = append(set, ks)
	}
	n, err := s.keep.Set(set, req.GetRespond())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "node %s: %v", s.node, err)
	}
	return &pb.KeepReply{ResponderSids: uint32(n)}, nil
}

// KeptDigest is the digest of the set the node keeps (oam.KeepSet.Digest;
// "" after a Keep that failed): the agent reports it with its state's
// digest (server.Server.ReportKeptOAM).
func (s *Server) KeptDigest() string { return s.keep.Digest() }

// Sightings implements pb.OAMServer.
func (s *Server) Sightings(_ context.Context, req *pb.SightingsRequest) (*pb.SightingsReply, error) {
	r, err := s.keep.Sightings(req.GetChain(), req.GetAfter())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "node %s: %v", s.node, err)
	}
	out := &pb.SightingsReply{Kept: r.Kept, Next: r.Next, Lost: r.Lost, Seen: r.Counts.Seen, Marked: r.Counts.Marked,
		Hmac: r.Counts.HMAC, ClockOffsetNs: int64(oam.ClockOffset()), BootId: oam.BootID(), NowNs: uint64(oam.MonoNow())}
	for _, e := range r.Events {
		out.Events = append(out.Events, &pb.SampleEvent{AtNs: uint64(e.At), Kind: uint32(e.Kind), Da: e.DA[:], Id: e.ID[:], Sl: uint32(e.SL)})
	}
	return out, nil
}

// Collector exports the node's kept samplings (the agent registers it on
// its /metrics).
func (s *Server) Collector() prometheus.Collector {
	return metrics.NodeSampling(s.node, func() []metrics.NodeSample {
		var out []metrics.NodeSample
		for _, c := range s.keep.Counts() {
			out = append(out, metrics.NodeSample{Chain: c.Chain, Marker: c.Marker, Packets: c.Counts.Seen,
				Marked: c.Counts.Marked, HMAC: c.Counts.HMAC, Arrivals: c.Arrivals})
		}
		return out
	}, s.keep.Responder)
}

// Close detaches what the node keeps (the agent's exit would too: the
// programs are the agent's, not pinned).
func (s *Server) Close() error { return s.keep.Close() }

// Keep implements oam.Keeping: node's agent keeps set.
func (c *Client) Keep(ctx context.Context, node string, set oam.KeepSet) (int, error) {
	cl, ok := c.conns[node]
	if !ok {
		return 0, fmt.Errorf("node %s has no agent", node)
	}
	req := &pb.KeepRequest{Respond: set.Respond}
	for _, s := range set.Samples {
		k := &pb.KeptSample{Chain: s.Chain, FirstSid: s.Key.First[:], LastSid: s.Key.Last[:], Rate: s.Rate, Tap: s.Tap}
		for _, a := range s.SIDs {
			b := a.As16()
			k.Sids = append(k.Sids, b[:])
		}
		req.Samples = append(req.Samples, k)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := cl.Keep(ctx, req)
	if err != nil {
		return 0, callErr(node, "keep OAM", err)
	}
	return int(r.GetResponderSids()), nil
}

// Sightings implements oam.Keeping.
func (c *Client) Sightings(ctx context.Context, node, chain string, after uint64) (oam.NodeSightings, error) {
	cl, ok := c.conns[node]
	if !ok {
		return oam.NodeSightings{}, fmt.Errorf("node %s has no agent", node)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := cl.Sightings(ctx, &pb.SightingsRequest{Chain: chain, After: after}, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil {
		return oam.NodeSightings{}, callErr(node, "sightings", err)
	}
	out := oam.NodeSightings{Offset: time.Duration(r.GetClockOffsetNs()), Boot: r.GetBootId(), Now: time.Duration(r.GetNowNs())}
	out.Kept, out.Next, out.Lost = r.GetKept(), r.GetNext(), r.GetLost()
	out.Counts = oam.SampleCounts{Seen: r.GetSeen(), Marked: r.GetMarked(), HMAC: r.GetHmac()}
	for _, e := range r.GetEvents() {
		ev := oam.SampleEvent{At: time.Duration(e.GetAtNs()), Kind: uint8(e.GetKind()), SL: uint8(e.GetSl())}
		copy(ev.DA[:], e.GetDa())
		copy(ev.ID[:], e.GetId())
		out.Events = append(out.Events, ev)
	}
	return out, nil
}
