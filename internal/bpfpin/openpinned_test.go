package bpfpin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/testutil"
)

// OpenPinned opens pinned maps laid out as the spec says, and refuses
// (ErrMapIncompatible) one laid out otherwise or missing.
func TestOpenPinned(t *testing.T) {
	testutil.RequireRoot(t)
	root, err := Root()
	if err != nil {
		t.Skip(err)
	}
	dir, err := os.MkdirTemp(root, "openpinned-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	spec := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{
		"m": {Name: "m", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 8},
	}}
	p := Program{Name: "openpinned-test-" + filepath.Base(dir), What: "test",
		Load: func() (*ebpf.CollectionSpec, error) { return spec.Copy(), nil }}
	type maps struct {
		M *ebpf.Map `ebpf:"m"`
	}
	pin := func(valueSize uint32) {
		os.Remove(filepath.Join(dir, "m"))
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "m", Type: ebpf.Hash, KeySize: 4, ValueSize: valueSize, MaxEntries: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if err := m.Pin(filepath.Join(dir, "m")); err != nil {
			t.Fatal(err)
		}
	}
	var o maps
	if err := p.OpenPinned(&o, dir); !errors.Is(err, ebpf.ErrMapIncompatible) {
		t.Fatalf("no map pinned: %v, want ErrMapIncompatible", err)
	}
	pin(4)
	if err := p.OpenPinned(&o, dir); err != nil || o.M == nil {
		t.Fatalf("the spec's layout: %v", err)
	}
	o.M.Close()
	o = maps{}
	pin(8)
	if err := p.OpenPinned(&o, dir); !errors.Is(err, ebpf.ErrMapIncompatible) || o.M != nil {
		t.Fatalf("value of 8 bytes, the spec's 4: %v, want ErrMapIncompatible", err)
	}
}
