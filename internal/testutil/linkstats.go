package testutil

import (
	"encoding/json"
	"testing"
)

// RxOtherhost is the kernel's count of frames dev in ns received for
// another host (a VLAN ID no VLAN device takes, among others) and
// dropped: the kernel's own word on a tagged frame's fate.
func RxOtherhost(t *testing.T, ns, dev string) uint64 {
	t.Helper()
	var l []struct {
		Stats struct {
			RX map[string]uint64 `json:"rx"`
		} `json:"stats64"`
	}
	out := Exec(t, ns, "ip", "-j", "-s", "-s", "link", "show", "dev", dev)
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l) != 1 {
		t.Fatalf("ip -j -s -s link show %s: %v: %s", dev, err, out)
	}
	return l[0].Stats.RX["otherhost"]
}
