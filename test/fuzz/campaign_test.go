package fuzz

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"sort"
	"strconv"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// report is the part of scripts/fuzz-boundary.py --json the test checks.
type report struct {
	Delivered   int      `json:"delivered"`
	Undercount  []string `json:"undercounted_phases"`
	CaptureLoss int      `json:"capture_losses"`
	Total       struct {
		Sent          int            `json:"sent"`
		MustDrop      int            `json:"must_drop"`
		BoundaryDrops int            `json:"boundary_drops"`
		ByReason      map[string]int `json:"boundary_drops_by_reason"`
		Legit         int            `json:"legit_crossed"`
		ToNode        int            `json:"to_node"`
		SFOutput      int            `json:"sf_output"`
		Known         int            `json:"known_bypass"`
		Reflected     int            `json:"reflected"`
		Seconds       float64        `json:"seconds"`
	} `json:"total"`
	Phases map[string]struct {
		Sent       int `json:"sent"`
		MustDrop   int `json:"must_drop"`
		Drops      int `json:"boundary_drops_total"`
		Violations int `json:"violations"`
	} `json:"phases"`
}

// TestFuzzCampaign is the CI-sized run of the boundary fuzzer (the
// 100,000-frame campaign is run by hand, docs/security.md): structure-aware
// frames from host s into the default domain, and from the SF sf1 into the
// default domain with nfv1:eth-sf1 a boundary interface. Nothing addressed
// into the domain may be seen past the interface where it enters, no SID
// may process it, and every IPv6 frame to the SID space must be counted.
// Frames to an SF's own address are inside the domain too (the corpus'
// found-sf-address-*, closed): from s they must stop at the ingress and be
// counted (to-sf) like frames to the SID space.
func TestFuzzCampaign(t *testing.T) {
	testutil.RequireScapy(t)
	for _, c := range []struct {
		name, domain, from string
		count              int
		extra              []string
	}{
		{"from s", "default", "s", 6000, nil},
		{"from sf1", "default+sf1-boundary", "sf1", 3000, []string{"--prime", "s,fc00:4d::d,8080"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := labUp(t, domainFile(t, c.domain))
			args := append([]string{"../../scripts/fuzz-boundary.py", "--lab", l.name, "--segchain", segchainBin,
				"--from", c.from, "--count", strconv.Itoa(c.count), "--seed", "1", "--json"}, c.extra...)
			cmd := exec.Command("python3", args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, runErr := cmd.Output() // exit status 1 on a violation: the report says which
			var r report
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("fuzz-boundary.py: %v (%v)\n%s\n%s", err, runErr, out, stderr.String())
			}
			phases := make([]string, 0, len(r.Phases))
			for p := range r.Phases {
				phases = append(phases, p)
			}
			sort.Strings(phases)
			for _, p := range phases {
				ph := r.Phases[p]
				t.Logf("%-8s sent %5d  must-drop %5d  boundary drops %5d  violations %d", p, ph.Sent, ph.MustDrop, ph.Drops, ph.Violations)
			}
			tot := r.Total
			t.Logf("total: sent %d in %.1f s, must-drop %d, boundary drops %d %v, legit %d, to a node %d, SF output %d, reflected %d, known bypass %d",
				tot.Sent, tot.Seconds, tot.MustDrop, tot.BoundaryDrops, tot.ByReason, tot.Legit, tot.ToNode, tot.SFOutput, tot.Reflected, tot.Known)
			if tot.Sent < c.count-len(r.Phases) {
				t.Errorf("sent %d frames, want %d", tot.Sent, c.count)
			}
			if r.Delivered != 0 {
				t.Errorf("%d frames addressed into the domain got past the boundary (run the script by hand with --corpus to see them)\n%s", r.Delivered, stderr.String())
			}
			if tot.ByReason["in:to-sf"] == 0 && c.from == "s" {
				t.Error("no frame to the SF's address was dropped as to-sf: the campaign did not aim at it")
			}
			if len(r.Undercount) > 0 {
				t.Errorf("phases %v: fewer boundary drops than frames to the SID space", r.Undercount)
			}
			if r.CaptureLoss != 0 {
				t.Errorf("the captures lost %d frames: a crossing could hide among them", r.CaptureLoss)
			}
			if runErr != nil && r.Delivered == 0 && len(r.Undercount) == 0 {
				t.Errorf("fuzz-boundary.py: %v\n%s", runErr, stderr.String())
			}
		})
	}
}
