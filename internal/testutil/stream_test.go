package testutil

import (
	"os/exec"
	"testing"
	"time"
)

// A change that outlasts the stream's nominal length (200 datagrams at
// 1,000/s: 0.2 s; the change takes 1 s) still lands inside the stream:
// the sender keeps going while it runs and sends a tail after it, and
// every datagram arrives. Without the hold the stream ends before the
// change returns and Stream fails the test.
func TestStreamOutlastsTheChange(t *testing.T) {
	RequirePrivileged(t)
	a, b := NewNetns(t, "sta"), NewNetns(t, "stb")
	if out, err := exec.Command("ip", "-n", a, "link", "add", "v0", "type", "veth", "peer", "name", "v0", "netns", b).CombinedOutput(); err != nil {
		t.Fatalf("veth: %v\n%s", err, out)
	}
	Exec(t, a, "ip", "addr", "add", "fc00:5a::a/64", "dev", "v0", "nodad")
	Exec(t, b, "ip", "addr", "add", "fc00:5a::b/64", "dev", "v0", "nodad")
	Exec(t, a, "ip", "link", "set", "v0", "up")
	Exec(t, b, "ip", "link", "set", "v0", "up")
	const count = 200
	r := Stream(t, "../../scripts/seqstream.py", a, b, "fc00:5a::b", 7400, count, 1000, func() {
		time.Sleep(time.Second) // the change under test: longer than the stream
	})
	if r.SentAfterChange >= r.Sent || r.Sent <= count {
		t.Errorf("sent %d (nominal %d), %d of them when the change ended: the stream did not outlast the change", r.Sent, count, r.SentAfterChange)
	}
	if r.Lost != 0 || r.Unique != r.Sent {
		t.Errorf("%+v: want every datagram delivered", r)
	}
}
