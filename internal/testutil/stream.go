package testutil

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

// StreamResult is what scripts/seqstream.py's receiver reports.
type StreamResult struct {
	Sent       int `json:"sent"`
	Received   int `json:"received"`
	Unique     int `json:"unique"`
	Lost       int `json:"lost"`
	Duplicates int `json:"duplicates"`
	LongestGap int `json:"longest_gap"`
}

// Stream sends count sequence-numbered datagrams from namespace from to
// dst:port (a receiver in namespace to) at rate packets per second with
// script (scripts/seqstream.py), runs during (if not nil) while they
// flow, and returns the receiver's count. Nothing is timed: the receiver
// binds before anything is sent and stops one second after the last
// datagram it got.
func Stream(t testing.TB, script, from, to, dst string, port, count, rate int, during func()) StreamResult {
	t.Helper()
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	rcv := exec.Command("ip", "netns", "exec", to, "python3", abs, "recv", fmt.Sprint(port),
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
	if err := <-done; err != nil {
		t.Fatalf("receiver: %v\n%s", err, out.String())
	}
	var r StreamResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &r); err != nil {
		t.Fatalf("receiver output %q: %v", out.String(), err)
	}
	return r
}
