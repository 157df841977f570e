package bgp

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
)

// A session that flaps: the ingress–r1 link goes down and up five times in
// quick succession, under a stream through chain web. The speakers follow
// every change without anybody running apply; in the end the session is
// back, ingress routes nfv1's locator over r1 again, the chain forwards,
// and the domain's state is intact (apply finds nothing to change).
func TestPrivilegedBGPFlap(t *testing.T) {
	e := newEnv(t, domainFile)
	e.Must("apply", "--lab", e.Name)
	e.waitEstablished(30 * time.Second)
	e.waitRoute("ingress", "fc00:2::/64", []string{"eth-r1"}, 30*time.Second)

	const rate, count = 500, 5000
	res := testutil.Stream(t, seqstream, e.NS("s"), e.NS("d"), "fc00:4d::d", 5004, count, rate, func() {
		time.Sleep(time.Second)
		for i := 0; i < 5; i++ {
			testutil.Exec(t, e.NS("r1"), "ip", "link", "set", "eth-ingress", "down")
			time.Sleep(300 * time.Millisecond)
			testutil.Exec(t, e.NS("r1"), "ip", "link", "set", "eth-ingress", "up")
			time.Sleep(300 * time.Millisecond)
		}
	})
	t.Logf("five flaps of ingress–r1: stream %+v", res)
	if res.Received == 0 {
		t.Fatalf("nothing reached d while the link flapped: %+v", res)
	}
	e.waitEstablished(60 * time.Second)
	e.waitRoute("ingress", "fc00:2::/64", []string{"eth-r1"}, 30*time.Second)
	e.waitRoute("ingress", "fc00:4::/64", []string{"eth-r1", "eth-r2"}, 30*time.Second)
	if err := testutil.Ping(e.NS("s"), netip.MustParseAddr("fc00:4d::d"), 5*time.Second); err != nil {
		t.Errorf("chain web after the flaps: %v", err)
	}
	if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "no changes") {
		t.Errorf("the flaps changed the domain's state:\n%s", out)
	}
}
