package pools

import (
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// TestPoolThroughAgents: with an agent per node (lab up --agents), apply
// installs the selector through ingress's agent, the agent runs the
// node's health checks itself, and status (through the agents) shows an
// SF that stops forwarding as down — status --check exits 2 — and back.
func TestPoolThroughAgents(t *testing.T) { poolThroughAgents(t, "testdata/pooled.yaml", false) }

// TestPoolExample: examples/pools.yaml, with the checks' defaults (10 ms,
// fall 2, rise 3), does what its header shows an operator.
func TestPoolExample(t *testing.T) { poolThroughAgents(t, "../../examples/pools.yaml", false) }

// TestPoolThroughAgentsBGP: the same under routing: bgp (the agents' BGP
// speakers; the lab has no routers, so no FRR): the locators are learnt
// by BGP (iproute2 shows them as the speaker's, proto 199), the selector's
// re-routing and the in-band probes follow those routes, and while fw2 is
// down every flow still reaches d.
func TestPoolThroughAgentsBGP(t *testing.T) { poolThroughAgents(t, "testdata/pooled-bgp.yaml", true) }

func poolThroughAgents(t *testing.T, file string, bgp bool) {
	e := labenv.New(t, labenv.Options{File: file, Prefix: "s9g", CLI: true, Binary: bin, Agents: true, Tools: []string{"nft"}})
	e.Must("apply", "--lab", e.Name)
	if bgp {
		// The instances' locators at the headend come from BGP.
		deadline := time.Now().Add(60 * time.Second)
		for {
			out := testutil.Exec(t, e.NS("ingress"), "ip", "-6", "route", "show", "proto", "199")
			if strings.Contains(out, "fc00:2::/64") && strings.Contains(out, "fc00:3::/64") && strings.Contains(out, "fc00:5::/64") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ingress never learnt the instances' locators by BGP:\n%s", out)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	status := func() (string, int) {
		out, err := e.Run("status", "--lab", e.Name, "--check")
		code := 0
		if err != nil {
			code = 1
			if strings.Contains(out, "pool instance(s) down") {
				code = 2
			}
		}
		return out, code
	}
	wait := func(what string, ok func(out string, code int) bool) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, code := status()
			if ok(out, code) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never came:\n%s", what, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	wait("the agent's checks", func(out string, code int) bool {
		return code == 0 && strings.Contains(out, "pools:") && strings.Contains(out, "(checked ")
	})
	testutil.Exec(t, e.NS("sf2"), "nft", "add table inet s9g; add chain inet s9g s9gfwd { type filter hook forward priority 0; policy drop; }")
	out := wait("fw2 down", func(out string, code int) bool { return code == 2 })
	if !strings.Contains(out, "fw2 at ingress") || !strings.Contains(out, "fw2          packets") || !strings.Contains(out, "srv6 check failed") {
		t.Errorf("status while fw2 is down:\n%s", out)
	}
	if bgp {
		// Every flow still arrives (fw2's moved to fw1 and fw3).
		rcv := listen(t, e.NS("d"))
		deliver(t, e.NS("s"), rcv, ports(23000, 60))
	}
	if !bgp {
		// The headend's agent is killed and restarted: its new checks
		// start from the pinned liveness, so fw2 stays down with no new
		// transition (a checker that started all up would take it down
		// again: transitions-fw2 1), and status says so as soon as the
		// new agent reports.
		if err := e.Lab.StopAgent("ingress", true); err != nil {
			t.Fatal(err)
		}
		if err := e.Lab.StartAgent(bin, "ingress"); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		wait("the restarted agent's report", func(out string, code int) bool {
			at, ok := checkedAt(out)
			return code == 2 && ok && at.After(restarted.Add(time.Second))
		})
		js, err := e.Run("status", "--lab", e.Name, "-o", "json")
		if err != nil {
			t.Fatalf("status -o json: %v\n%s", err, js)
		}
		m := regexp.MustCompile(`"transitions-fw2":\s*(\d+)`).FindStringSubmatch(js)
		if m == nil || m[1] != "0" {
			t.Errorf("fw2's transitions after the agent restarted: %v, want 0 (it started from the pinned liveness)", m)
		}
	}
	testutil.Exec(t, e.NS("sf2"), "nft", "delete", "table", "inet", "s9g")
	wait("fw2 up again", func(out string, code int) bool { return code == 0 && strings.Contains(out, "srv6 check passed") })
}

// deliver sends a datagram per port from ns (s) to d until each arrived
// (neighbour discovery may hold the first ones), at most five rounds.
func deliver(t *testing.T, ns string, rcv *receiver, ps []int) {
	t.Helper()
	base := map[int]int{}
	for _, p := range ps {
		base[p] = rcv.count(p)
	}
	missing := ps
	for round := 0; len(missing) > 0; round++ {
		if round == 5 {
			t.Fatalf("%d of %d flows never reached d (ports %v...)", len(missing), len(ps), missing[:min(5, len(missing))])
		}
		for _, p := range missing {
			if err := nsutil.Do(ns, func() error {
				c, err := net.DialUDP("udp6", &net.UDPAddr{IP: srcAddr.AsSlice(), Port: p}, &net.UDPAddr{IP: dstAddr.AsSlice(), Port: dport})
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write([]byte("pool through agents"))
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			var left []int
			for _, p := range ps {
				if rcv.count(p) <= base[p] {
					left = append(left, p)
				}
			}
			missing = left
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// checkedAt is the time of status's "(checked …)" line (the report's).
func checkedAt(out string) (time.Time, bool) {
	m := regexp.MustCompile(`\(checked ([^)]+)\)`).FindStringSubmatch(out)
	if m == nil {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	return at, err == nil
}
