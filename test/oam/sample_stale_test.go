package oam_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// sampleState is what the headend ns holds of boundary marking: its
// protocol-205 routes and its fwmark rules, as iproute2 lists them.
func sampleState(t *testing.T, ns string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"-6", "rule", "show"}, {"-6", "route", "show", "table", "all", "proto", "205"}} {
		out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "fwmark") || strings.Contains(l, "proto 205") {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

// A sampler killed with SIGKILL (here `segchain trace --sample`) leaves
// its boundary marking behind: the filter's selectors, the O-flagged
// table and its rule, which would go on sending 1 in N of the chain's
// packets by the SIDs it had then. While a sampler lives, another
// process neither clears its state nor samples the same headend's filter
// (it falls back to the TCX marker); once it died, ClearStaleSampling
// (an agent's start) removes what it left.
func TestSampleKilledSamplerCleared(t *testing.T) {
	e := labenv.New(t, labenv.Options{File: "../../examples/default.yaml", Prefix: "s15st-", CLI: true, Binary: segchainBin})
	e.Must("apply", "--lab", e.Name)
	head := e.NS("ingress")

	tr, done, _ := startSampling(t, e.Name, head, "--duration", "60s")
	live := sampleState(t, head)

	// A live sampler's state stays; a second process falls back.
	if err := oam.ClearStaleSampling(head); err != nil {
		t.Fatal(err)
	}
	if got := sampleState(t, head); got != live {
		t.Fatalf("ClearStaleSampling changed a live sampler's state:\n%s\nnow:\n%s", live, got)
	}
	second, err := e.Run("trace", "--lab", e.Name, "--sample", "10", "--duration", "1s", "-o", "json", "web")
	if err != nil || !strings.Contains(second, "another process samples") {
		t.Errorf("a second sampler of the same headend: %v, want it marked by the TCX marker, saying why:\n%s", err, second)
	}
	if got := sampleState(t, head); got != live {
		t.Fatalf("a second sampler changed the first one's state:\n%s\nnow:\n%s", live, got)
	}

	if err := tr.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	if sampleState(t, head) == "" {
		t.Fatal("the killed sampler left nothing: the test proves nothing")
	}
	if err := oam.ClearStaleSampling(head); err != nil {
		t.Fatal(err)
	}
	if got := sampleState(t, head); got != "" {
		t.Errorf("after ClearStaleSampling the killed sampler's state is still there:\n%s", got)
	}
}

// waitSampleState waits up to a minute for the headend ns to hold
// boundary-marking state (want) or none.
func waitSampleState(t *testing.T, ns string, want bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); (sampleState(t, ns) != "") != want; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: O-flagged table or rule present = %v after a minute, want %v:\n%s", ns, !want, want, sampleState(t, ns))
		}
	}
}

// The headend's agent keeping a chain's sampling is killed with SIGKILL:
// the lab's supervisor restarts it, and the new agent removes the
// boundary marking the killed one left as it starts (before any apply:
// left alone, it would mark by the chain's old table); the next apply
// hands it the set again and the marking is back.
func TestKeptSamplingAgentKilled(t *testing.T) {
	const rate = 100
	e := labenv.New(t, labenv.Options{File: keptDomain(t, rate), Prefix: "s15ka-", CLI: true, Binary: segchainBin, Agents: true})
	e.Must("apply", "--lab", e.Name)
	head := e.NS("ingress")
	waitSampleState(t, head, true)
	pid := e.Lab.AgentStatus("ingress").PID
	if pid <= 0 {
		t.Fatalf("the headend's agent: %+v", e.Lab.AgentStatus("ingress"))
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if r := e.Lab.AgentStatus("ingress"); r.State == "running" && r.PID > 0 && r.PID != pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the headend's agent not restarted after SIGKILL: %+v", e.Lab.AgentStatus("ingress"))
		}
	}
	waitSampleState(t, head, false)
	e.Must("apply", "--lab", e.Name)
	waitSampleState(t, head, true)
}

// startSampling starts `segchain trace --sample 10 ARGS web` on lab and
// waits until the headend ns holds its boundary marking; the process is
// killed when the test ends, done receives its exit.
func startSampling(t *testing.T, lab, head string, args ...string) (*exec.Cmd, chan error, *strings.Builder) {
	t.Helper()
	tr := exec.Command(segchainBin, append([]string{"trace", "--lab", lab, "--sample", "10"}, append(args, "web")...)...)
	out := &strings.Builder{}
	tr.Stdout, tr.Stderr = out, out
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	t.Cleanup(func() { _ = tr.Process.Kill() })
	deadline := time.Now().Add(60 * time.Second)
	for sampleState(t, head) == "" {
		select {
		case err := <-done:
			t.Fatalf("trace ended before it marked: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no O-flagged table or rule on the headend after 60 s\n%s", out.String())
		}
	}
	return tr, done, out
}

// SIGINT and SIGTERM end a sampling run (one with a duration, and the
// continuous exporter) as its duration does: it reports and exits 0, and
// the headend keeps no boundary marking (a process killed by them left
// its pinned selectors, O-flagged table and rule behind).
func TestSampleSignalsLeaveNoState(t *testing.T) {
	e := labenv.New(t, labenv.Options{File: "../../examples/default.yaml", Prefix: "s15sg-", CLI: true, Binary: segchainBin})
	e.Must("apply", "--lab", e.Name)
	head := e.NS("ingress")
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		args []string
	}{
		{"SIGINT", syscall.SIGINT, []string{"--duration", "60s"}},
		{"SIGTERM", syscall.SIGTERM, []string{"--duration", "60s"}},
		{"SIGTERM-continuous", syscall.SIGTERM, []string{"--metrics-listen", "127.0.0.1:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, done, out := startSampling(t, e.Name, head, tc.args...)
			if err := tr.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Errorf("trace after %v: %v, want exit 0\n%s", tc.sig, err, out.String())
			}
			if got := sampleState(t, head); got != "" {
				t.Errorf("after %v the headend keeps:\n%s", tc.sig, got)
			}
		})
	}
}

// A sampler killed with SIGKILL, then its lab taken down: the sampling
// lock file of the headend's namespace, which nobody could ever clear
// again, is removed by `segchain lab down` (it stayed in
// /run/segchain/sample for good).
func TestLabDownRemovesStaleSampleLock(t *testing.T) {
	e := labenv.New(t, labenv.Options{File: "../../examples/default.yaml", Prefix: "s16bld-", CLI: true, Binary: segchainBin})
	e.Must("apply", "--lab", e.Name)
	head := e.NS("ingress")
	var st syscall.Stat_t
	if err := syscall.Stat("/run/netns/"+head, &st); err != nil {
		t.Fatal(err)
	}
	lock := fmt.Sprintf("/run/segchain/sample/netns-%d.lock", st.Ino)
	t.Cleanup(func() { os.Remove(lock) })
	tr, done, _ := startSampling(t, e.Name, head, "--duration", "60s")
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the sampler's lock file: %v", err)
	}
	if err := tr.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the killed sampler's lock file: %v (the test proves nothing)", err)
	}
	out := e.Must("lab", "down", "--lab", e.Name)
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after lab down the killed sampler's lock file %s: %v, want removed\n%s", lock, err, out)
	}
}
