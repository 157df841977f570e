package oamsvc

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/segchain/segchain/internal/oam/oampb"
)

// What a caller may not ask of a node is refused before anything is
// attached or sent (no root needed: nothing reaches the kernel).
func TestServerRefusesBadRequests(t *testing.T) {
	s := New("n1", "")
	for _, c := range []struct {
		name string
		req  *pb.TapRequest
	}{
		{"magic 0", &pb.TapRequest{}},
		{"too long", &pb.TapRequest{Magic: 1, MaxMs: uint32(MaxTap.Milliseconds()) + 1}},
	} {
		if err := s.Tap(c.req, nil); status.Code(err) != codes.InvalidArgument {
			t.Errorf("tap %s: %v, want InvalidArgument", c.name, err)
		}
	}
	for _, c := range []struct {
		name string
		req  *pb.InjectRequest
	}{
		{"no iface", &pb.InjectRequest{Packet: make([]byte, 40)}},
		{"short", &pb.InjectRequest{Iface: "lo", Packet: []byte{0x60, 0}}},
		{"too long", &pb.InjectRequest{Iface: "lo", Packet: append([]byte{0x60}, make([]byte, 1500)...)}},
		{"not IP", &pb.InjectRequest{Iface: "lo", Packet: make([]byte, 40)}},
	} {
		if _, err := s.Inject(context.Background(), c.req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("inject %s: %v, want InvalidArgument", c.name, err)
		}
	}
	sid := make([]byte, 16)
	for _, c := range []struct {
		name string
		req  *pb.SampleRequest
	}{
		{"short SID", &pb.SampleRequest{FirstSid: sid[:4], LastSid: sid, DurationMs: 1000}},
		{"no duration", &pb.SampleRequest{FirstSid: sid, LastSid: sid}},
		{"too long", &pb.SampleRequest{FirstSid: sid, LastSid: sid, DurationMs: uint32(MaxSample.Milliseconds()) + 1}},
	} {
		if err := s.Sample(c.req, nil); status.Code(err) != codes.InvalidArgument {
			t.Errorf("sample %s: %v, want InvalidArgument", c.name, err)
		}
	}
}
