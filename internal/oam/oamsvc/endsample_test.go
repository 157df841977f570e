package oamsvc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/oam"
	pb "github.com/segchain/segchain/internal/oam/oampb"
)

// sampleLog records when the fakes' runs ended.
type sampleLog struct {
	mu       sync.Mutex
	headEnd  time.Time
	segEnd   time.Time
	endCalls int
}

// lateHead is a headend whose marker takes late to start (a loaded
// machine), then marks one packet in dur.
type lateHead struct {
	pb.UnimplementedOAMServer
	late, dur time.Duration
	log       *sampleLog
}

func (h *lateHead) Sample(_ *pb.SampleRequest, st pb.OAM_SampleServer) error {
	time.Sleep(h.late)
	if err := st.Send(&pb.SampleEvent{Ready: true, BootId: "k"}); err != nil {
		return err
	}
	time.Sleep(h.dur)
	if err := st.Send(&pb.SampleEvent{AtNs: 1, Kind: 1}); err != nil {
		return err
	}
	h.log.mu.Lock()
	h.log.headEnd = time.Now()
	h.log.mu.Unlock()
	return st.Send(&pb.SampleEvent{Done: true, Seen: 10, Marked: 1})
}

// segment is a segment node's run: an agent that knows EndSample waits
// for it when the request names the run; an older one (legacy) runs
// duration_ms.
type segment struct {
	pb.UnimplementedOAMServer
	legacy bool
	log    *sampleLog
	mu     sync.Mutex
	runs   map[string]chan struct{}
}

func (s *segment) Sample(req *pb.SampleRequest, st pb.OAM_SampleServer) error {
	endable := !s.legacy && req.GetRun() != ""
	ended := make(chan struct{})
	if endable {
		s.mu.Lock()
		s.runs = map[string]chan struct{}{req.GetRun(): ended}
		s.mu.Unlock()
	}
	if err := st.Send(&pb.SampleEvent{Ready: true, BootId: "k", Endable: endable}); err != nil {
		return err
	}
	if endable {
		select {
		case <-ended:
		case <-st.Context().Done():
			return st.Context().Err()
		}
	} else {
		time.Sleep(time.Duration(req.GetDurationMs()) * time.Millisecond)
	}
	s.log.mu.Lock()
	s.log.segEnd = time.Now()
	s.log.mu.Unlock()
	if err := st.Send(&pb.SampleEvent{AtNs: 2, Kind: 0}); err != nil {
		return err
	}
	return st.Send(&pb.SampleEvent{Done: true})
}

func (s *segment) EndSample(_ context.Context, req *pb.EndSampleRequest) (*pb.EndSampleReply, error) {
	if s.legacy {
		return s.UnimplementedOAMServer.EndSample(nil, req)
	}
	s.log.mu.Lock()
	s.log.endCalls++
	s.log.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	ended, ok := s.runs[req.GetRun()]
	if ok {
		close(ended)
		delete(s.runs, req.GetRun())
	}
	return &pb.EndSampleReply{Found: ok}, nil
}

// A headend that starts marking late (1.5 s, a loaded machine: 29 of 122
// marked packets were reported incomplete so) no longer marks after the
// segment nodes stopped seeing: their runs end by EndSample once the
// headend's has ended, not by a duration fixed before the headend
// started. An agent that predates EndSample runs its duration, as before.
func TestSampleSegmentsOutlastLateHeadend(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := map[bool]string{false: "endable", true: "legacy-agent"}[legacy]
		t.Run(name, func(t *testing.T) {
			log := &sampleLog{}
			const dur = 200 * time.Millisecond
			c := dialFakes(t, map[string]pb.OAMServer{
				"head": &lateHead{late: 1500 * time.Millisecond, dur: dur, log: log},
				"seg":  &segment{legacy: legacy, log: log},
			})
			evs, counts, err := c.Sample(context.Background(), []string{"head", "seg"}, "head", oam.ChainKey{}, 10, dur, nil, oam.NewTimeline())
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || counts.Seen != 10 || counts.Marked != 1 {
				t.Fatalf("events %+v, counts %+v: want the mark and the sighting, 10 seen, 1 marked", evs, counts)
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if legacy {
				if log.endCalls != 0 {
					t.Errorf("EndSample served %d times by an agent that does not know it", log.endCalls)
				}
				return
			}
			if log.endCalls != 1 {
				t.Errorf("EndSample called %d times, want 1", log.endCalls)
			}
			if !log.segEnd.After(log.headEnd) {
				t.Errorf("the segment's run ended %v before the late headend's marking ended", log.headEnd.Sub(log.segEnd))
			}
		})
	}
}
