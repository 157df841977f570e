package testutil

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StreamResult is what scripts/seqstream.py's receiver reports.
type StreamResult struct {
	Sent       int `json:"sent"`
	Received   int `json:"received"`
	Unique     int `json:"unique"`
	Lost       int `json:"lost"`
	Duplicates int `json:"duplicates"`
	LongestGap int `json:"longest_gap"`
	Last       int `json:"last"` // the highest sequence number received, -1 for none
}

// Stream sends count sequence-numbered datagrams from namespace from to
// dst:port (a receiver in namespace to) at rate packets per second with
// script (scripts/seqstream.py), runs during (if not nil) while they
// flow, and returns the receiver's count. Nothing is timed: the receiver
// binds before anything is sent, counts through gaps of any length, and
// stops one second after the sender is done and no datagram came.
func Stream(t testing.TB, script, from, to, dst string, port, count, rate int, during func()) StreamResult {
	t.Helper()
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	rcv := exec.Command("ip", "netns", "exec", to, "python3", abs, "recv", fmt.Sprint(port),
		"--ready", ready, "--until-signal", "--first", "10", "--idle", "1")
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
	snd := exec.Command("ip", "netns", "exec", from, "python3", abs, "send", dst, fmt.Sprint(port),
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
	// The sender is done: the receiver stops once a second has passed
	// without a packet (a gap during the stream never stops it).
	if err := rcv.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatalf("receiver: %v\n%s", err, out.String())
	}
	if err := <-done; err != nil {
		t.Fatalf("receiver: %v\n%s", err, out.String())
	}
	var r StreamResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &r); err != nil {
		t.Fatalf("receiver output %q: %v", out.String(), err)
	}
	return r
}
