package labenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// What a lab leaves behind is reported: a process of the lab (its name
// in the command line) still running, a namespace still there, a file
// (pin) left in a namespace's bpffs directory; a process that only got
// a recorded pid again is not the lab's and is left alone.
func TestLeftoversReported(t *testing.T) {
	Gate(t)
	name := testutil.UniqueName("lv")
	ns := testutil.NewNetns(t, name)
	pins := t.TempDir()
	if err := os.MkdirAll(filepath.Join(pins, "fw"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pins, "fw", "map_sids"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ours := exec.Command("sh", "-c", "sleep 600", name)
	other := exec.Command("sleep", "600")
	for _, c := range []*exec.Cmd{ours, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	lo := leftovers{name: name, pids: map[int]string{ours.Process.Pid: "agent of n1", other.Process.Pid: "agent of n2"},
		netns: map[string]bool{ns: true}, pinDirs: map[string]bool{pins: true}}
	got := strings.Join(lo.left(), "\n")
	for _, want := range []string{"agent of n1) outlived", "namespace " + ns + " outlived", "bpffs pin " + filepath.Join(pins, "fw", "map_sids")} {
		if !strings.Contains(got, want) {
			t.Errorf("leftovers %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "agent of n2") {
		t.Errorf("a process that is not the lab's was reported: %q", got)
	}
	// Nothing left: nothing reported.
	_ = ours.Wait()
	if err := os.Remove(filepath.Join(pins, "fw", "map_sids")); err != nil {
		t.Fatal(err)
	}
	lo.netns = nil
	if got := lo.left(); len(got) != 0 {
		t.Errorf("a clean lab reported %q", got)
	}
}
