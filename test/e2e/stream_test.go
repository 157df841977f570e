package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// seqstream is scripts/seqstream.py: a sequence-numbered UDP stream whose
// receiver counts lost and duplicated sequence numbers.
const seqstream = "../../scripts/seqstream.py"

// streamResult is what the receiver reports.
type streamResult struct {
	Sent       int `json:"sent"`
	Received   int `json:"received"`
	Unique     int `json:"unique"`
	Lost       int `json:"lost"`
	Duplicates int `json:"duplicates"`
	LongestGap int `json:"longest_gap"`
}

// stream sends count sequence-numbered datagrams from s to d:port at rate
// packets per second and runs during (if not nil) while they flow; it
// returns the receiver's count. Nothing is timed: the receiver stops one
// second after the last datagram it got.
func stream(t *testing.T, e *env, port, count, rate int, during func()) streamResult {
	t.Helper()
	abs, err := filepath.Abs(seqstream)
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	rcv := exec.Command("ip", "netns", "exec", e.ns("d"), "python3", abs, "recv", fmt.Sprint(port),
		"--ready", ready, "--first", "10", "--idle", "1")
	var out strings.Builder
	rcv.Stdout, rcv.Stderr = &out, &out
	if err := rcv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rcv.Wait() }()
	defer func() { _ = rcv.Process.Kill() }()
	for { // the receiver's socket is bound before anything is sent
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("receiver exited: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	snd := exec.Command("ip", "netns", "exec", e.ns("s"), "python3", abs, "send", "fc00:4d::d", fmt.Sprint(port),
		"--count", fmt.Sprint(count), "--rate", fmt.Sprint(rate))
	var sout strings.Builder
	snd.Stdout, snd.Stderr = &sout, &sout
	if err := snd.Start(); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during()
	}
	if err := snd.Wait(); err != nil {
		t.Fatalf("sender: %v\n%s", err, sout.String())
	}
	if err := <-done; err != nil {
		t.Fatalf("receiver: %v\n%s", err, out.String())
	}
	var r streamResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &r); err != nil {
		t.Fatalf("receiver output %q: %v", out.String(), err)
	}
	return r
}
