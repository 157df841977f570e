package boundary

import (
	"sync"
	"testing"

	"github.com/cilium/ebpf"
)

// The spec is parsed once per process (bpfpin.Parsed) and handed out as
// copies: concurrent observers may each change theirs (pinning) without
// touching the others'.
func TestSpecCopies(t *testing.T) {
	var wg sync.WaitGroup
	specs := make([]*ebpf.CollectionSpec, 8)
	for i := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := loader.Spec()
			if err != nil {
				t.Error(err)
				return
			}
			specs[i] = s
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if specs[0] == specs[1] || specs[0].Maps["bnd_lpm"] == specs[1].Maps["bnd_lpm"] {
		t.Fatal("two calls share a spec")
	}
	specs[0].Maps["bnd_lpm"].MaxEntries = 1
	if specs[1].Maps["bnd_lpm"].MaxEntries == 1 {
		t.Fatal("a change to one copy shows in another")
	}
	if specs[1].Maps["bnd_lpm"].Pinning != ebpf.PinByName {
		t.Fatal("maps not pinned by name")
	}
}
