package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// upLab brings up a lab named h14-<random> from file ("" = the built-in
// default) and takes it down at the end of the test.
func upLab(t *testing.T, file string) string {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "ip")
	name := testutil.UniqueName("h14-")
	t.Cleanup(func() {
		if err := lab.Down(name); err != nil && !errors.Is(err, lab.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
	})
	args := []string{"lab", "up", "--lab", name}
	if file != "" {
		args = append(args, "-f", file)
	}
	if out, err := runRoot(t, "", args...); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	return name
}

func TestLabDomainFile(t *testing.T) {
	l := &lab.Lab{Name: "x", File: "/abs/bidirectional.yaml"}
	var note bytes.Buffer
	if got := labDomainFile(l, "", &note); got != l.File || note.Len() != 0 {
		t.Errorf("no -f: got %q (note %q), want the lab's file", got, note.String())
	}
	if got := labDomainFile(l, "/abs/bidirectional.yaml", &note); got != l.File || note.Len() != 0 {
		t.Errorf("same -f: got %q (note %q)", got, note.String())
	}
	if got := labDomainFile(l, "/abs/other.yaml", &note); got != "/abs/other.yaml" || !strings.Contains(note.String(), "brought up from /abs/bidirectional.yaml") {
		t.Errorf("other -f: got %q (note %q)", got, note.String())
	}
	note.Reset()
	if got := labDomainFile(&lab.Lab{Name: "d"}, "", &note); got != "" {
		t.Errorf("default lab: got %q, want the built-in domain", got)
	}
	if got := labDomainFile(nil, "f.yaml", &note); got != "f.yaml" || note.Len() != 0 {
		t.Errorf("no lab: got %q", got)
	}
}

// TestPrivilegedPlanUsesLabFile: a lab brought up from a file is planned
// from that file, not from the built-in default (whose nodes differ).
func TestPrivilegedPlanUsesLabFile(t *testing.T) {
	name := upLab(t, "../../examples/bidirectional.yaml")
	out, err := runRoot(t, "", "plan", "--lab", name)
	if err != nil {
		t.Fatalf("plan --lab %s: %v\n%s", name, err, out)
	}
	if !strings.Contains(out, "node edge2") {
		t.Errorf("plan does not show node edge2 of bidirectional.yaml:\n%s", out)
	}
}

// TestPrivilegedHandMadeSIDs: apply and destroy never remove a SID made by
// hand, and a hand-made SID where the domain wants one is a conflict plan
// reports (and apply refuses) before anything changes.
func TestPrivilegedHandMadeSIDs(t *testing.T) {
	name := upLab(t, "")
	t.Cleanup(func() { _, _ = runRoot(t, "", "destroy", "--lab", name) })
	ns := lab.NetnsName(name, "nfv1")
	t.Cleanup(func() { _, _ = runRoot(t, "", "sid", "--netns", ns, "flush") })

	// A hand-made SID outside the domain's SIDs survives apply and destroy.
	const mine = "fc00:2::99"
	if out, err := runRoot(t, "", "sid", "--netns", ns, "add", mine, "End.X", "nh6", "fc00:25::5"); err != nil {
		t.Fatalf("sid add: %v\n%s", err, out)
	}
	out, err := runRoot(t, "", "plan", "--lab", name)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	if strings.Contains(out, "- route "+mine) {
		t.Errorf("plan would delete the hand-made SID:\n%s", out)
	}
	for _, verb := range []string{"apply", "destroy"} {
		if out, err := runRoot(t, "", verb, "--lab", name); err != nil {
			t.Fatalf("%s: %v\n%s", verb, err, out)
		}
		if out, err := runRoot(t, "", "sid", "--netns", ns, "show", mine); err != nil {
			t.Errorf("after %s, the hand-made SID is gone: %v\n%s", verb, err, out)
		}
	}

	// A hand-made SID at a domain SID: plan and apply report the conflict.
	out, err = runRoot(t, "", "plan", "--lab", name, "-o", "json")
	if err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	var p struct {
		Plan struct {
			SIDs []struct {
				SID      string `json:"sid"`
				Node     string `json:"node"`
				Behavior string `json:"behavior"`
			} `json:"sids"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	var domainSID string
	for _, s := range p.Plan.SIDs {
		if s.Node == "nfv1" && s.Behavior == "End" {
			domainSID = s.SID
		}
	}
	if domainSID == "" {
		t.Fatalf("no End SID on nfv1 in the default plan:\n%s", out)
	}
	if out, err := runRoot(t, "", "sid", "--netns", ns, "add", domainSID, "End"); err != nil {
		t.Fatalf("sid add %s: %v\n%s", domainSID, err, out)
	}
	for _, verb := range []string{"plan", "apply"} {
		out, err := runRoot(t, "", verb, "--lab", name)
		if err == nil || !errors.Is(err, controller.ErrConflict) || !strings.Contains(err.Error(), "made by hand") {
			t.Errorf("%s with a hand-made SID at %s: err %v, want a conflict\n%s", verb, domainSID, err, out)
		}
	}
	if out, err := runRoot(t, "", "sid", "--netns", ns, "show", domainSID, "-o", "json"); err != nil || !strings.Contains(out, `"origin": "hand-made"`) {
		t.Errorf("the hand-made SID at %s was changed: %v\n%s", domainSID, err, out)
	}
}

// TestPrivilegedPlanProbesKernel: plan runs each node's kernel feature probe
// and reports a behaviour the kernel lacks as an error naming the service,
// before anything changes (apply used to fail on an internal probe route
// and roll back).
func TestPrivilegedPlanProbesKernel(t *testing.T) {
	h, err := dataplane.Open("")
	if err != nil {
		t.Fatal(err)
	}
	f := h.Probe()
	h.Close()
	if f.EndDT4.Supported {
		t.Skip("this kernel supports End.DT4 (VRF): nothing to report")
	}
	name := upLab(t, "testdata/dt4.yaml")
	for _, verb := range []string{"plan", "apply"} {
		out, err := runRoot(t, "", verb, "--lab", name)
		if !errors.Is(err, controller.ErrUnsupported) || !strings.Contains(err.Error(), "service dt4: End.DT4 at") ||
			!strings.Contains(err.Error(), "node nfv") {
			t.Errorf("%s: err %v, want End.DT4 of service dt4 unsupported on node nfv\n%s", verb, err, out)
		}
	}
	if out, _ := runRoot(t, "", "sid", "--netns", lab.NetnsName(name, "nfv"), "show"); strings.Contains(out, "End.DT4") {
		t.Errorf("apply installed the End.DT4 SID:\n%s", out)
	}
}

// TestPrivilegedExitCodes: plan --detailed-exitcode and status --check gate
// CI: 2 with changes or drift, 0 when every node matches.
func TestPrivilegedExitCodes(t *testing.T) {
	name := upLab(t, "")
	t.Cleanup(func() { _, _ = runRoot(t, "", "destroy", "--lab", name) })
	code := func(args ...string) int {
		t.Helper()
		out, err := runRoot(t, "", args...)
		if c := exitCode(err); c == exitError {
			t.Fatalf("%v: %v\n%s", args, err, out)
		} else {
			return c
		}
		return 0
	}
	if c := code("plan", "--lab", name, "--detailed-exitcode"); c != exitChanges {
		t.Errorf("plan --detailed-exitcode on a fresh lab: exit %d, want 2", c)
	}
	if c := code("plan", "--lab", name); c != exitOK {
		t.Errorf("plan without --detailed-exitcode: exit %d, want 0", c)
	}
	if c := code("status", "--lab", name, "--check"); c != exitChanges {
		t.Errorf("status --check before apply: exit %d, want 2 (drift)", c)
	}
	code("apply", "--lab", name)
	if c := code("plan", "--lab", name, "--detailed-exitcode"); c != exitOK {
		t.Errorf("plan --detailed-exitcode after apply: exit %d, want 0", c)
	}
	if c := code("status", "--lab", name, "--check"); c != exitOK {
		t.Errorf("status --check after apply: exit %d, want 0", c)
	}
	// Drift: a domain route removed behind segchain's back.
	ns := lab.NetnsName(name, "nfv1")
	if out, err := testutil.ExecErr(ns, "ip", "-6", "route", "flush", "proto", fmt.Sprint(nodestate.Proto)); err != nil {
		t.Fatalf("ip route flush: %v\n%s", err, out)
	}
	if c := code("status", "--lab", name, "--check"); c != exitChanges {
		t.Errorf("status --check with drift: exit %d, want 2", c)
	}
	out, err := runRoot(t, "", "plan", "--lab", name)
	if err != nil || !strings.Contains(out, "to add, 0 to change, 0 to delete") {
		t.Errorf("plan summary after drift: %v\n%s", err, out)
	}
}

// TestPrivilegedHandMadeEBPFSIDs: SR proxies and firewall instances made by
// hand (no route protocol tells them apart) survive apply and destroy of a
// domain that has its own, and sid flush/del leave the domain's alone.
func TestPrivilegedHandMadeEBPFSIDs(t *testing.T) {
	name := upLab(t, "")
	t.Cleanup(func() { _, _ = runRoot(t, "", "destroy", "--lab", name) })
	node := []string{"--lab", name, "--node", "nfv2"}
	t.Cleanup(func() { _, _ = runRoot(t, "", append([]string{"sid", "flush"}, node...)...) })
	const mine = "fc00:3::e1:0/112"
	if out, err := runRoot(t, "", append([]string{"sid", "add", mine, "End.AN.FW", "policy", "accept"}, node...)...); err != nil {
		t.Fatalf("sid add End.AN.FW: %v\n%s", err, out)
	}
	has := func(when string, sid string, want bool) {
		t.Helper()
		out, err := runRoot(t, "", append([]string{"sid", "show"}, node...)...)
		if err != nil {
			t.Fatalf("%s: sid show: %v", when, err)
		}
		if strings.Contains(out, sid) != want {
			t.Errorf("%s: %s present = %v, want %v:\n%s", when, sid, !want, want, out)
		}
	}
	if out, err := runRoot(t, "", "apply", "--lab", name); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	has("after apply", mine, true)
	has("after apply", "fc00:3::f1:0/112", true) // the domain's firewall (nfv2-fw)
	if _, err := runRoot(t, "", append([]string{"sid", "del", "fc00:3::f1:0/112"}, node...)...); err == nil || !strings.Contains(err.Error(), "belongs to the domain") {
		t.Errorf("sid del of the domain's firewall: %v, want a refusal", err)
	}
	if out, err := runRoot(t, "", append([]string{"sid", "flush"}, node...)...); err != nil {
		t.Fatalf("sid flush: %v\n%s", err, out)
	}
	has("after sid flush", mine, false)
	has("after sid flush", "fc00:3::f1:0/112", true)
	if out, err := runRoot(t, "", append([]string{"sid", "add", mine, "End.AN.FW", "policy", "accept"}, node...)...); err != nil {
		t.Fatalf("sid add End.AN.FW: %v\n%s", err, out)
	}
	if out, err := runRoot(t, "", "destroy", "--lab", name); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	has("after destroy", mine, true)
	has("after destroy", "fc00:3::f1:0/112", false)
}
