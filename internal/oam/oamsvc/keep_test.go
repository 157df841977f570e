package oamsvc

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/segchain/segchain/internal/oam/oampb"
)

// Keep refuses a set it cannot keep, whole: nothing is attached for it.
func TestKeepRefusesBadSets(t *testing.T) {
	s := New("n", "")
	sid := make([]byte, 16)
	for name, req := range map[string]*pb.KeepRequest{
		"short SID": {Samples: []*pb.KeptSample{{Chain: "c", FirstSid: sid[:4], LastSid: sid, Tap: true}}},
		"no chain":  {Samples: []*pb.KeptSample{{FirstSid: sid, LastSid: sid, Tap: true}}},
		"IPv4 sids": {Samples: []*pb.KeptSample{{Chain: "c", FirstSid: sid, LastSid: sid, Tap: true, Sids: [][]byte{{10, 0, 0, 1}}}}},
	} {
		if _, err := s.Keep(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if chains, respond := s.keep.Kept(); len(chains) != 0 || respond {
		t.Errorf("kept %v, responder %v after refused sets", chains, respond)
	}
	// An empty set keeps nothing (destroy's), and Sightings says so.
	if _, err := s.Keep(context.Background(), &pb.KeepRequest{}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Sightings(context.Background(), &pb.SightingsRequest{Chain: "c"})
	if err != nil || r.GetKept() {
		t.Errorf("sightings of a chain not kept: %v %v", r, err)
	}
}
