package bgp

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

// lossWitness records, while a stream crosses a change, what a lost
// datagram would leave behind: every route event on the nodes (ip monitor
// with timestamps) and the kernel's IPv6 and interface counters before
// and after. Only a test that lost packets prints it: the next flaky loss
// names where it died (a counter that moved, a route withdrawn and
// re-added) instead of only how many.
type lossWitness struct {
	e      *env
	nodes  []string
	mons   []*exec.Cmd
	events []*strings.Builder
	before map[string]map[string]string
	start  time.Time
}

func (e *env) witness(nodes ...string) *lossWitness {
	e.T.Helper()
	w := &lossWitness{e: e, nodes: nodes, start: time.Now()}
	for _, n := range nodes {
		c := exec.Command("ip", "-n", e.NS(n), "-6", "-ts", "monitor", "route", "neigh")
		b := &strings.Builder{}
		c.Stdout = b
		if err := c.Start(); err != nil {
			e.T.Fatalf("ip monitor (%s): %v", n, err)
		}
		w.mons = append(w.mons, c)
		w.events = append(w.events, b)
	}
	e.T.Cleanup(w.stop)
	w.before = w.counters()
	return w
}

// counters reads each node's /proc/net/snmp6 and /proc/net/dev.
func (w *lossWitness) counters() map[string]map[string]string {
	m := map[string]map[string]string{}
	for _, n := range w.nodes {
		out, err := exec.Command("ip", "netns", "exec", w.e.NS(n), "cat", "/proc/net/snmp6", "/proc/net/dev").Output()
		if err != nil {
			w.e.T.Logf("counters of %s: %v", n, err)
			continue
		}
		m[n] = map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			switch f := strings.Fields(l); {
			case len(f) == 2: // snmp6: name value
				m[n][f[0]] = f[1]
			case len(f) > 4 && strings.HasSuffix(f[0], ":"): // dev: name: rx… tx…
				m[n][f[0]] = strings.Join(f[1:], " ")
			}
		}
	}
	return m
}

func (w *lossWitness) stop() {
	for _, c := range w.mons {
		if c.Process != nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	w.mons = nil
}

// report logs, for a stream that lost packets, the counters that moved
// (octets aside) and every route and neighbour event since the witness
// started.
func (w *lossWitness) report(t *testing.T) {
	t.Helper()
	after := w.counters()
	w.stop()
	t.Logf("loss witness since %s:", w.start.Format("15:04:05.000000"))
	for i, n := range w.nodes {
		var moved []string
		for k, v := range after[n] {
			if w.before[n][k] != v && !strings.Contains(k, "Octets") && !strings.Contains(k, "Pkts") {
				moved = append(moved, k+" "+w.before[n][k]+" → "+v)
			}
		}
		sort.Strings(moved)
		t.Logf("%s counters moved: %s\n%s events:\n%s", n, strings.Join(moved, "; "), n, w.events[i].String())
	}
}
