package health

import (
	"fmt"
	"time"
)

// detector judges numbered probes (echo, in-band srv6) by deadline, not by
// tick: a probe is lost only when no answer had arrived (by the kernel's
// receive timestamp, read before judging) by its send time plus a timeout
// that follows the measured round trip, like TCP's RTO (RFC 6298):
//
//	timeout = clamp(SRTT + 4·RTTVAR, spec timeout, 10 × spec timeout)
//
// On an idle host the RTT is µs and the timeout is the spec's (the
// interval by default), so detection stays ≤ interval × (fall + 1). When
// the path slows (a loaded host) the timeout grows with it, so late
// answers are not failures; a real failure brings no samples, so the
// timeout stays where it was. And a checker that wakes late (its own
// process starved) gives the probes it finds unanswered one more timeout
// before it counts them: its own lateness is not evidence of the SF's
// failure. Pure: checked with made-up clocks in detector_test.go.
type detector struct {
	floor, ceil  time.Duration
	srtt, rttvar time.Duration
	samples      int
	out          []outstanding // in sequence order
	late         uint64        // wake-ups later than lateSlack
	lost         []outstanding // the last probes judged lost (late answers)
	lateAnswers  uint64        // answers after their probe was judged lost
}

type outstanding struct {
	seq      uint64
	sent     time.Time
	answered bool
	rtt      time.Duration
	grace    time.Time // set once: judged no earlier than this (a late wake)
}

// ceilFactor bounds the adaptive timeout (and so detection on a slow
// path): 10 × the spec's timeout, 100 ms with the defaults.
const ceilFactor = 10

func newDetector(s Spec) *detector {
	return &detector{floor: s.Timeout, ceil: ceilFactor * s.Timeout}
}

// timeout is the current deadline after a probe's send time. Before the
// first answer it is the ceiling (a checker that just started has nothing
// to adapt to and no reason to hurry).
func (d *detector) timeout() time.Duration {
	if d.samples == 0 {
		return d.ceil
	}
	return min(max(d.srtt+4*d.rttvar, d.floor), d.ceil)
}

func (d *detector) sent(seq uint64, at time.Time) {
	d.out = append(d.out, outstanding{seq: seq, sent: at})
}

// answer records probe seq's answer, received at at. An answer for a probe
// already judged lost still updates the RTT: it was late, not missing.
func (d *detector) answer(seq uint64, at time.Time) {
	for i := range d.out {
		o := &d.out[i]
		if o.seq == seq && !o.answered {
			o.answered = true
			o.rtt = max(at.Sub(o.sent), 0)
			d.sample(o.rtt)
			return
		}
	}
	d.lateAnswer(seq, at)
}

// lateAnswer: a probe judged lost answered after all (its RTT counts).
func (d *detector) lateAnswer(seq uint64, at time.Time) {
	for i, l := range d.lost {
		if l.seq == seq {
			d.sample(max(at.Sub(l.sent), 0))
			d.lost = append(d.lost[:i], d.lost[i+1:]...)
			d.lateAnswers++
			return
		}
	}
}

func (d *detector) sample(r time.Duration) {
	if d.samples == 0 {
		d.srtt, d.rttvar = r, r/2
	} else {
		dev := d.srtt - r
		if dev < 0 {
			dev = -dev
		}
		d.rttvar = (3*d.rttvar + dev) / 4
		d.srtt = (7*d.srtt + r) / 8
	}
	d.samples++
}

// result is one judged probe.
type result struct {
	ok  bool
	why string
}

// lateSlack: a wake-up later than this after its planned instant is the
// checker's own lateness.
func (d *detector) lateSlack() time.Duration { return d.floor / 2 }

// due judges, in order, the probes that are answered or past their
// deadline at now; lateness is how late this wake-up is against its plan.
func (d *detector) due(now time.Time, lateness time.Duration) []result {
	late := lateness > d.lateSlack()
	if late {
		d.late++
	}
	to := d.timeout()
	var out []result
	for len(d.out) > 0 {
		o := &d.out[0]
		if !o.answered {
			deadline := o.sent.Add(to)
			if now.Before(deadline) || now.Before(o.grace) {
				break
			}
			if late && o.grace.IsZero() {
				// Found unanswered by a checker that ran late: the
				// answer may be as late as we are. One more timeout.
				o.grace = now.Add(d.floor)
				break
			}
			d.lost = append(d.lost, *o)
			if len(d.lost) > 64 {
				d.lost = d.lost[1:]
			}
			out = append(out, result{why: fmt.Sprintf("%d not answered within %v", o.seq, to.Round(10*time.Microsecond))})
		} else {
			out = append(out, result{ok: true})
		}
		d.out = d.out[1:]
	}
	return out
}

// next is when the oldest outstanding probe falls due (zero: none).
func (d *detector) next() time.Time {
	if len(d.out) == 0 {
		return time.Time{}
	}
	o := d.out[0]
	if o.answered {
		return o.sent // due now
	}
	t := o.sent.Add(d.timeout())
	if t.Before(o.grace) {
		t = o.grace
	}
	return t
}
