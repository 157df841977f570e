package apply

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/segchain/segchain/internal/controller"
)

// stdout runs the binary and returns its stdout alone and its exit status
// (-1: it did not run).
func (e *env) stdout(args ...string) (string, int) {
	e.T.Helper()
	cmd := exec.Command(segchainBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	}
	e.T.Fatalf("segchain %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	return "", -1
}

// statusJSON is the part of status -o json the tests read.
type statusJSON struct {
	Nodes []struct {
		Node  string `json:"node"`
		State string `json:"state"`
	} `json:"nodes"`
	Chains []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"chains"`
	Broken []controller.BrokenChain `json:"broken"`
}

func (e *env) statusJSON() statusJSON {
	e.T.Helper()
	out, rc := e.stdout("status", "-f", domainFile, "--lab", e.Name, "-o", "json")
	if rc != 0 {
		e.T.Fatalf("status -o json: exit %d\n%s", rc, out)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		e.T.Fatalf("status -o json does not parse: %v\n%s", err, out)
	}
	return st
}

// checkShort fails when status' text is long or has a long line: what
// matters must not be buried (the 9-node lab never applied printed 46 KB).
func checkShort(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 50 || len(out) > 4000 {
		t.Errorf("status prints %d lines, %d bytes; want at most 50 lines, 4000 bytes:\n%s", len(lines), len(out), out)
	}
	for _, l := range lines {
		if len(l) > 160 {
			t.Errorf("status line of %d bytes: %.200s…", len(l), l)
		}
	}
}

// TestStatusNotApplied: on a lab never applied, status says "not applied"
// in one line per node and per chain, --check exits 2, and the missing
// objects are listed with -v and in -o json; the same when only one node
// (sf1) lost everything segchain installed on it.
func TestStatusNotApplied(t *testing.T) {
	e := newEnvFile(t, domainFile, "h6s-")
	status := func(args ...string) (string, int) {
		return e.stdout(append([]string{"status", "-f", domainFile, "--lab", e.Name}, args...)...)
	}

	out, rc := status()
	if rc != 0 {
		t.Fatalf("status: exit %d\n%s", rc, out)
	}
	checkShort(t, out)
	for _, n := range e.Lab.NodeNames() {
		if want := "not applied: node " + n + " "; strings.Count(out, want) != 1 {
			t.Errorf("status does not say %q once:\n%s", want, out)
		}
	}
	for _, ch := range []string{"web", "firewalled", "filtered"} {
		if !regexp.MustCompile(`(?m)^` + ch + ` +not applied$`).MatchString(out) {
			t.Errorf("status does not say chain %s is not applied:\n%s", ch, out)
		}
	}
	if _, rc := status("--check"); rc != 2 {
		t.Errorf("status --check on a lab not applied: exit %d, want 2", rc)
	}
	if out, _ := status("-v"); !strings.Contains(out, "chain web broken: node nfv1: ") || !strings.Contains(out, "(missing)") {
		t.Errorf("status -v lacks the missing objects:\n%.3000s", out)
	}
	st := e.statusJSON()
	for _, n := range st.Nodes {
		if n.State != controller.StateNotApplied {
			t.Errorf("-o json: node %s state %q, want %q", n.Node, n.State, controller.StateNotApplied)
		}
	}
	for _, ch := range st.Chains {
		if ch.State != controller.StateNotApplied {
			t.Errorf("-o json: chain %s state %q, want %q", ch.Name, ch.State, controller.StateNotApplied)
		}
	}
	if len(st.Broken) == 0 || len(st.Broken[0].Missing) == 0 {
		t.Errorf("-o json lacks broken[].missing: %+v", st.Broken)
	}

	// Partly applied: sf1 loses its only route (the one segchain put there).
	e.Must("apply", "-f", domainFile, "--lab", e.Name)
	if out, rc := status("--check"); rc != 0 {
		t.Fatalf("status --check after apply: exit %d\n%s", rc, out)
	}
	if out, err := exec.Command("ip", "-n", e.NS("sf1"), "-6", "route", "del", "default").CombinedOutput(); err != nil {
		t.Fatalf("delete sf1's default route: %v\n%s", err, out)
	}
	out, _ = status()
	checkShort(t, out)
	for _, want := range []string{
		"not applied: node sf1 holds nothing of segchain's (1 change(s) pending); run segchain apply\n",
		"chain firewalled broken: node sf1 (not applied); run segchain apply",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not applied: node nfv1") || strings.Contains(out, "chain web broken") {
		t.Errorf("status blames nodes or chains that are in sync:\n%s", out)
	}
	if _, rc := status("--check"); rc != 2 {
		t.Errorf("status --check with sf1 not applied: exit %d, want 2", rc)
	}
	if out, _ := status("-v"); !strings.Contains(out, "chain firewalled broken: node sf1: route ::/0 via") {
		t.Errorf("status -v lacks sf1's missing route:\n%s", out)
	}
	st = e.statusJSON()
	for _, n := range st.Nodes {
		want := controller.StateInSync
		if n.Node == "sf1" {
			want = controller.StateNotApplied
		}
		if n.State != want {
			t.Errorf("-o json: node %s state %q, want %q", n.Node, n.State, want)
		}
	}
	for _, ch := range st.Chains {
		want := controller.StateInSync
		if ch.Name == "firewalled" {
			want = controller.StateDrift
		}
		if ch.State != want {
			t.Errorf("-o json: chain %s state %q, want %q", ch.Name, ch.State, want)
		}
	}
}

// TestStatusWatch: with a ping stream through chain web, status --watch
// shows a positive packet rate for each of web's SIDs; -o json prints one
// parsable object per sample; piped text has no escape codes, a terminal's
// redraws in place; SIGINT stops it with exit status 0.
func TestStatusWatch(t *testing.T) {
	e := newEnvFile(t, domainFile, "h6w-")
	e.Must("apply", "-f", domainFile, "--lab", e.Name)
	ping := exec.Command("ip", "netns", "exec", e.NS("s"), "ping", "-6", "-q", "-i", "0.02", "fc00:4d::d")
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ping.Process.Kill(); _ = ping.Wait() })
	watch := []string{"status", "-f", domainFile, "--lab", e.Name, "--watch", "--interval", "300ms"}

	// web's SIDs: fc00:2:: (nfv1-end), fc00:3:: (nfv2-end), its egress.
	webSIDs := map[string]bool{}
	for _, n := range []string{"nfv1-end", "nfv2-end", "web egress"} {
		webSIDs[n] = true
	}
	out, rc := e.stdout(append(watch, "--count", "3", "-o", "json")...)
	if rc != 0 {
		t.Fatalf("status --watch -o json: exit %d\n%s", rc, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("--count 3 -o json: %d lines, want 3:\n%s", len(lines), out)
	}
	for i, l := range lines {
		var s struct {
			Elapsed float64 `json:"elapsed_s"`
			SIDs    []struct {
				Node        string  `json:"node"`
				Service     string  `json:"service"`
				PacketsPerS float64 `json:"packets_per_s"`
				DropsPerS   float64 `json:"drops_per_s"`
			} `json:"sids"`
		}
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("sample %d does not parse: %v\n%s", i, err, l)
		}
		if s.Elapsed <= 0 {
			t.Errorf("sample %d: elapsed %v", i, s.Elapsed)
		}
		moving := map[string]bool{}
		for _, r := range s.SIDs {
			if webSIDs[r.Service] && r.PacketsPerS > 0 {
				moving[r.Service] = true
			}
		}
		if len(moving) != len(webSIDs) {
			t.Errorf("sample %d: chain web's SIDs with a positive packet rate: %v, want %v\n%s", i, moving, webSIDs, l)
		}
	}

	out, rc = e.stdout(append(watch, "--count", "2")...)
	if rc != 0 || strings.Contains(out, "\x1b") || !strings.Contains(out, " nfv1-end pkt/s=") {
		t.Errorf("status --watch piped: exit %d, want plain lines without escape codes:\n%q", rc, out)
	}
	// script(1) gives it a terminal: the screen is cleared and redrawn.
	tty, err := exec.Command("script", "-qec", strings.Join(append([]string{segchainBin}, append(watch, "--count", "2")...), " "), "/dev/null").Output()
	if err != nil {
		t.Fatalf("status --watch on a terminal: %v\n%s", err, tty)
	}
	if strings.Count(string(tty), "\x1b[H\x1b[2J") < 2 || !strings.Contains(string(tty), "PKT/S") {
		t.Errorf("status --watch on a terminal does not redraw in place:\n%q", tty)
	}

	// SIGINT after the first sample: exit status 0.
	cmd := exec.Command(segchainBin, watch...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(r)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatalf("no sample before SIGINT: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, rd) }()
	if err := waitExit(t, cmd); err != nil {
		t.Errorf("status --watch after SIGINT: %v, want exit status 0", err)
	}
}
