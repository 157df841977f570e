package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

func TestRecordUnfinishedClear(t *testing.T) {
	root := t.TempDir()
	ids := map[string]string{"nfv1": "ns-1-1", "nfv2": "ns-2-2"}
	d := New(root, ids)
	ops := []agent.Op{
		{Kind: agent.KindSysctl, Action: agent.ActSet, Sysctl: &nodestate.Sysctl{Key: "net.ipv6.conf.all.forwarding", Value: "1"}, OldValue: "0"},
		{Kind: agent.KindTunSrc, Action: agent.ActSet, TunSrc: "fc00:2::1"},
	}
	for _, op := range ops {
		if err := d.Record("nfv1", op); err != nil {
			t.Fatal(err)
		}
	}
	// A writer killed mid-line leaves a torn last line: its op never ran.
	f, err := os.OpenFile(filepath.Join(root, "ns-1-1", file), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"op":{"kind":"ro`)
	f.Close()

	other := New(root, ids) // the next command
	got, who, err := other.Unfinished("nfv1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ops, got); d != "" {
		t.Errorf("unfinished ops (-want +got):\n%s", d)
	}
	if !strings.Contains(who, "pid ") {
		t.Errorf("who = %q, want the writer's pid", who)
	}
	if got, who, _ := other.Unfinished("nfv2"); got != nil || who != "" {
		t.Errorf("nfv2 has no journal, got %v %q", got, who)
	}
	if err := other.Clear("nfv1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "ns-1-1")); !os.IsNotExist(err) {
		t.Errorf("journal directory left after Clear: %v", err)
	}
	if got, _, _ := other.Unfinished("nfv1"); got != nil {
		t.Errorf("after Clear: %v", got)
	}
}

// TestUnfinishedOldOps: a journal from before the service-kind seam (a
// "proxies" op) is refused with a clear error, not replayed half-read.
func TestUnfinishedOldOps(t *testing.T) {
	root := t.TempDir()
	d := New(root, map[string]string{"n": "ns-1-1"})
	if err := d.Record("n", agent.Op{Kind: "proxies", Action: agent.ActSet}); err != nil {
		t.Fatal(err)
	}
	_, _, err := New(root, map[string]string{"n": "ns-1-1"}).Unfinished("n")
	if err == nil || !strings.Contains(err.Error(), "older segchain") {
		t.Fatalf("Unfinished = %v, want an error about an older segchain", err)
	}
}

// RecordAll journals a batch (one sync) that Unfinished reads back in
// order, after what Record wrote before it, under one header.
func TestRecordAll(t *testing.T) {
	root := t.TempDir()
	d := New(root, map[string]string{"n": "ns-1-1"})
	first := agent.Op{Kind: agent.KindTunSrc, Action: agent.ActSet, TunSrc: "fc00:2::1"}
	if err := d.Record("n", first); err != nil {
		t.Fatal(err)
	}
	batch := []agent.Op{
		{Kind: agent.KindSysctl, Action: agent.ActSet, Sysctl: &nodestate.Sysctl{Key: "net.ipv6.conf.all.forwarding", Value: "1"}, OldValue: "0"},
		{Kind: agent.KindTunSrc, Action: agent.ActSet, TunSrc: "fc00:2::2", OldTun: "fc00:2::1"},
	}
	if err := d.RecordAll("n", batch); err != nil {
		t.Fatal(err)
	}
	if err := d.RecordAll("n", nil); err != nil {
		t.Fatal(err)
	}
	got, who, err := New(root, map[string]string{"n": "ns-1-1"}).Unfinished("n")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append([]agent.Op{first}, batch...), got); diff != "" {
		t.Errorf("unfinished ops (-want +got):\n%s", diff)
	}
	if !strings.Contains(who, "pid ") {
		t.Errorf("who = %q, want the writer's pid", who)
	}
	b, _ := os.ReadFile(filepath.Join(root, "ns-1-1", file))
	if n := strings.Count(string(b), `"header"`); n != 1 {
		t.Errorf("%d headers in the journal, want 1:\n%s", n, b)
	}
}

// A command killed between making a node's journal directory and its file
// leaves the directory alone: Unfinished finds nothing to undo and removes
// it, so nothing of that command stays behind.
func TestUnfinishedEmptyDir(t *testing.T) {
	root := t.TempDir()
	d := New(root, map[string]string{"nfv1": "ns-1-1"})
	if err := os.MkdirAll(filepath.Join(root, "ns-1-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	ops, who, err := d.Unfinished("nfv1")
	if err != nil || ops != nil || who != "" {
		t.Fatalf("Unfinished of an empty journal directory: %v %q %v", ops, who, err)
	}
	if _, err := os.Stat(filepath.Join(root, "ns-1-1")); !os.IsNotExist(err) {
		t.Errorf("the empty journal directory is still there: %v", err)
	}
}

// Clearing the journal of a node nothing was recorded for is a no-op, even
// when the journal's root was never made (an agent whose first command
// failed on another node before reaching it, then rolled back: issue 24).
func TestClearNothingRecorded(t *testing.T) {
	root := filepath.Join(t.TempDir(), "journal") // does not exist
	d := New(root, map[string]string{"n": "node-n"})
	if err := d.Clear("n"); err != nil {
		t.Fatalf("Clear of a node with no journal: %v", err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("Clear made %s (err %v)", root, err)
	}
}

// A journal an older segchain wrote (its header's time named "started")
// still says who wrote it and since when; one written for a remote
// controller (SetWho) names the controller.
func TestUnfinishedWho(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ns-1-1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"header":{"pid":4242,"command":"segchain apply -f a.yaml","started":"2026-11-25T09:00:00Z","node":"n"}}` + "\n" +
		`{"op":{"kind":"tunsrc","action":"set","tunsrc":"fc00:2::1"}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, file), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	d := New(root, map[string]string{"n": "ns-1-1", "r": "ns-2-2"})
	if _, who, err := d.Unfinished("n"); err != nil || who != "pid 4242 (segchain apply -f a.yaml) since 2026-11-25T09:00:00Z" {
		t.Errorf("who of an older journal = %q, %v", who, err)
	}
	d.SetWho("pid 7 (segchain apply) on host ops1")
	if err := d.Record("r", agent.Op{Kind: agent.KindTunSrc, Action: agent.ActSet, TunSrc: "fc00:2::1"}); err != nil {
		t.Fatal(err)
	}
	if _, who, err := d.Unfinished("r"); err != nil || !strings.HasPrefix(who, "pid 7 (segchain apply) on host ops1, since ") {
		t.Errorf("who of a journal written for a remote controller = %q, %v", who, err)
	}
}
