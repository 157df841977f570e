package testutil

import (
	"encoding/binary"
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
	// Gaps are the five longest runs of lost sequence numbers, each
	// [first, length]: with SentBefore and SentAfterChange they place a
	// loss before, inside or after the change.
	Gaps [][2]int `json:"gaps"`

	// With a change (during): how many datagrams the sender had sent when
	// the change started and when it ended. Stream fails the test unless
	// 0 < SentBefore and SentAfterChange < Sent: the change happened inside
	// the stream, not before the first datagram or after the last.
	SentBefore      int `json:"-"`
	SentAfterChange int `json:"-"`
}

// Stream sends count sequence-numbered datagrams from namespace from to
// dst:port (a receiver in namespace to) at rate packets per second with
// script (scripts/seqstream.py), runs during (if not nil) while they
// flow, and returns the receiver's count. Nothing is timed: the receiver
// binds before anything is sent, counts through gaps of any length, and
// stops one second after the sender is done and no datagram came.
//
// With during, Stream proves the overlap instead of assuming it: it starts
// the change only once the sender has sent a tenth of the stream (at most
// a tenth of a second's worth), keeps the stream going while the change
// runs (count is then a minimum: a slow change, on a loaded machine, gets
// a longer stream, not a stream that ended before it), and fails the test
// unless datagrams were sent after the change returned.
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
	progress := filepath.Join(t.TempDir(), "progress")
	if err := os.WriteFile(progress, make([]byte, 8), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"netns", "exec", from, "python3", abs, "send", dst, fmt.Sprint(port),
		"--count", fmt.Sprint(count), "--rate", fmt.Sprint(rate), "--progress", progress}
	hold := filepath.Join(t.TempDir(), "hold")
	if during != nil {
		// The stream outlasts the change however long it takes (a loaded
		// machine): the sender keeps going while hold exists.
		if err := os.WriteFile(hold, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--hold", hold)
	}
	snd := exec.Command("ip", args...)
	var sout strings.Builder
	snd.Stdout, snd.Stderr = &sout, &sout
	if err := snd.Start(); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() { sent <- snd.Wait() }()
	var before, after int
	if during != nil {
		warm := max(1, min(count/10, rate/10))
		for before = readProgress(t, progress); before < warm; before = readProgress(t, progress) {
			select {
			case err := <-sent:
				t.Fatalf("sender exited before the change: %v\n%s", err, sout.String())
			case <-time.After(5 * time.Millisecond):
			}
		}
		during()
		after = readProgress(t, progress)
		if err := os.Remove(hold); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("sender: %v\n%s", err, sout.String())
	}
	if during != nil {
		total := readProgress(t, progress)
		t.Logf("stream: %d datagrams sent before the change, %d during it, %d after it", before, after-before, total-after)
		if after >= total {
			t.Fatalf("the change ended after the stream (all %d datagrams sent, %d before it started): nothing was sent after it, so the stream says nothing about it", total, before)
		}
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
	r.SentBefore, r.SentAfterChange = before, after
	return r
}

// readProgress reads the sender's count of datagrams sent so far.
func readProgress(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 8 {
		t.Fatalf("sender progress %s: %v (%d bytes)", path, err, len(b))
	}
	return int(binary.BigEndian.Uint64(b))
}
