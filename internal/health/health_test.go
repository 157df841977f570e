package health

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

type fakeLive struct {
	word  uint32
	calls int
}

func (f *fakeLive) SetInstance(_, i int, up bool) error {
	f.calls++
	if up {
		f.word |= 1 << i
	} else {
		f.word &^= 1 << i
	}
	return nil
}
func (f *fakeLive) Live(int) (uint32, error) { return f.word, nil }

// Fall failures in a row take an instance down, Rise successes bring it
// up; one line per transition; a checker starts from the data path's word.
func TestRiseFall(t *testing.T) {
	live := &fakeLive{word: 0b11}
	var buf bytes.Buffer
	c := New([]Target{{Pool: "p", Instance: 1, Name: "fw2", Spec: Spec{Kind: SRv6, Rise: 3, Fall: 2}}}, live, slog.New(slog.NewTextHandler(&buf, nil)))
	s := c.state[0]
	for i, step := range []struct {
		ok   bool
		want uint32
	}{{false, 0b11}, {true, 0b11}, {false, 0b11}, {false, 0b01}, {false, 0b01}, {true, 0b01}, {true, 0b01}, {false, 0b01}, {true, 0b01}, {true, 0b01}, {true, 0b11}} {
		c.record(s, step.ok, "why")
		if live.word != step.want {
			t.Fatalf("step %d (ok %v): word %02b, want %02b", i, step.ok, live.word, step.want)
		}
	}
	if live.calls != 2 || c.Status()[0].Transitions != 2 {
		t.Errorf("%d writes, %d transitions; want 2 each", live.calls, c.Status()[0].Transitions)
	}
	if n := strings.Count(buf.String(), "pool instance"); n != 2 || !strings.Contains(buf.String(), "instance=fw2") {
		t.Errorf("log:\n%s", buf.String())
	}
	// Started on a word with fw2 down: it needs Rise successes.
	live2 := &fakeLive{word: 0b01}
	c2 := New([]Target{{Pool: "p", Instance: 1, Name: "fw2", Spec: Spec{Kind: SRv6}}}, live2, nil)
	if c2.Status()[0].Up {
		t.Error("a checker started on a down instance says up")
	}
}

// The in-band probe's frame: outer IPv6 to the first SID, SRH with the
// list reversed and SL at the first, inner IPv6 UDP to the source.
func TestProbeFrame(t *testing.T) {
	b := Frame(mustAddr("fc00:1a::1"), []netipAddr{mustAddr("fc00:3::f1"), mustAddr("fc00:4::d6")}, 7000, 0xabc, 5)
	if b[6] != 43 || b[40] != 41 || b[40+2] != 4 || b[40+3] != 1 || b[40+4] != 1 {
		t.Fatalf("headers % x", b[:48])
	}
	if got := addrAt(b, 24); got != mustAddr("fc00:3::f1") {
		t.Errorf("destination %s", got)
	}
	if got := addrAt(b, 48); got != mustAddr("fc00:4::d6") {
		t.Errorf("segment 0 %s", got)
	}
	if got := addrAt(b, 64); got != mustAddr("fc00:3::f1") {
		t.Errorf("segment 1 %s", got)
	}
	if len(b) != 40+8+32+40+8+16 {
		t.Errorf("length %d", len(b))
	}
}

// publishCheck is a Liveness that, when a transition is written, checks
// that the checker's report (Publish) already has it: status reads the
// liveness, then the report, and must never see an instance down without
// its reason (TestPoolThroughAgents once saw exit code 2 with no
// "srv6 check failed").
type publishCheck struct {
	fakeLive
	t         *testing.T
	published []InstanceStatus
}

func (p *publishCheck) SetInstance(pool, i int, up bool) error {
	if len(p.published) != 1 || p.published[0].Up != up || p.published[0].Last == nil || p.published[0].Last.Up != up {
		p.t.Errorf("liveness written (up %v) before the report had the transition: report %+v", up, p.published)
	}
	return p.fakeLive.SetInstance(pool, i, up)
}

func TestReportBeforeLiveness(t *testing.T) {
	live := &publishCheck{fakeLive: fakeLive{word: 0b11}, t: t}
	c := New([]Target{{Pool: "p", Instance: 1, Name: "fw2", Spec: Spec{Kind: SRv6, Rise: 1, Fall: 1}}}, live, slog.New(slog.DiscardHandler))
	c.Publish = func() { live.published = c.Status() }
	c.record(c.state[0], false, "probe 1 not answered")
	if live.word != 0b01 || !strings.Contains(live.published[0].Last.Reason, "srv6 check failed") {
		t.Fatalf("down: word %02b, report %+v", live.word, live.published)
	}
	c.record(c.state[0], true, "")
	if live.word != 0b11 || !strings.Contains(live.published[0].Last.Reason, "srv6 check passed") {
		t.Fatalf("up: word %02b, report %+v", live.word, live.published)
	}
}
