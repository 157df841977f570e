package bgp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// A lab brought up from a static domain with routers runs no FRR; apply of
// the same domain under routing: bgp starts FRR on the routers (the lab's
// routing follows the applied domain), and apply back to static stops it,
// the routers' static routes in place again; segchain watch's apply of the
// bgp domain starts it too. Traffic through chain web flows in every
// state.
func TestPrivilegedBGPSwitchRouters(t *testing.T) {
	segchainProto := fmt.Sprintf("proto %d", nodestate.Proto)
	b, err := os.ReadFile(domainFile)
	if err != nil {
		t.Fatal(err)
	}
	staticFile := filepath.Join(t.TempDir(), "redundant-static.yaml")
	i := strings.Index(string(b), "\nrouting:")
	if i < 0 {
		t.Fatalf("%s has no routing section", domainFile)
	}
	if err := os.WriteFile(staticFile, []byte(string(b[:i])+"\nrouting: {mode: static}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnvArgs(t, staticFile, false)
	flows := func(when string) {
		t.Helper()
		if res := testutil.Stream(t, seqstream, e.NS("s"), e.NS("d"), "fc00:4d::d", 5003, 200, 200, nil); res.Received == 0 {
			t.Fatalf("%s: nothing through chain web: %+v", when, res)
		}
	}
	routerDaemons := func() map[string]map[string]int {
		l, err := lab.Get(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]map[string]int{}
		for n, dir := range l.FRR {
			m[n] = frr.PIDs(dir)
		}
		return m
	}
	e.Must("apply", "-f", staticFile, "--lab", e.Name)
	if d := routerDaemons(); len(d) != 0 {
		t.Fatalf("FRR in a static lab: %v", d)
	}
	flows("static")

	e.Must("apply", "-f", domainFile, "--lab", e.Name)
	d := routerDaemons()
	for _, r := range []string{"r1", "r2"} {
		if d[r]["zebra"] == 0 || d[r]["bgpd"] == 0 {
			t.Fatalf("after apply static → bgp, %s runs %v, want zebra and bgpd", r, d[r])
		}
	}
	e.waitEstablished(30 * time.Second)
	e.waitRoute("ingress", "fc00:2::/64", []string{"eth-r1"}, 10*time.Second)
	// r1 routes nfv1's locator with zebra (FRR's bgp protocol), not with
	// the static route apply installed before.
	if out := testutil.Exec(t, e.NS("r1"), "ip", "-N", "-6", "route", "show", "fc00:4::/64"); !strings.Contains(out, "proto 186") || strings.Contains(out, segchainProto) {
		t.Errorf("r1's route to egress's locator under bgp: %q", out)
	}
	flows("bgp")
	var pids []int
	for _, m := range d {
		for _, p := range m {
			pids = append(pids, p)
		}
	}

	e.Must("apply", "-f", staticFile, "--lab", e.Name)
	if d := routerDaemons(); len(d) != 0 {
		t.Errorf("FRR left after apply bgp → static: %v", d)
	}
	for _, p := range pids {
		if testutil.Alive(p) {
			t.Errorf("FRR daemon pid %d outlived the switch back to static", p)
		}
	}
	if out := testutil.Exec(t, e.NS("r1"), "ip", "-N", "-6", "route", "show", "fc00:4::/64"); !strings.Contains(out, segchainProto) {
		t.Errorf("r1's route to egress's locator back under static: %q", out)
	}
	flows("static again")
	if out := e.Must("apply", "-f", staticFile, "--lab", e.Name); !strings.Contains(out, "no changes") {
		t.Errorf("static again is not the static domain:\n%s", out)
	}

	// segchain watch applies through the same controller: its apply of
	// the bgp domain starts the routers' FRR too.
	w := exec.Command(segchainBin, "watch", "-f", domainFile, "--lab", e.Name, "-o", "json")
	out, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var werr strings.Builder
	w.Stderr = &werr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = w.Process.Kill()
		<-exited
	})
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		first <- line
		_, _ = io.Copy(io.Discard, out)
		exited <- w.Wait()
	}()
	select {
	case line := <-first:
		var ev struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Error != "" {
			t.Fatalf("watch's initial apply: %q (%v)\n%s", line, err, werr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("watch printed no initial apply in 60 s\n%s", werr.String())
	}
	d = routerDaemons()
	for _, r := range []string{"r1", "r2"} {
		if d[r]["zebra"] == 0 || d[r]["bgpd"] == 0 {
			t.Errorf("after watch's apply of the bgp domain, %s runs %v, want zebra and bgpd", r, d[r])
		}
	}
	e.waitEstablished(30 * time.Second)
	e.waitRoute("ingress", "fc00:2::/64", []string{"eth-r1"}, 10*time.Second)
	flows("bgp by watch")
	if err := w.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}
