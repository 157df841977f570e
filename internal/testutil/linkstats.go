package testutil

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// SNMP6 is namespace ns's IPv6 MIB counters (/proc/net/snmp6: the
// kernel's own word on what it dropped, e.g. Ip6FragFails).
func SNMP6(t *testing.T, ns string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, l := range strings.Split(Exec(t, ns, "cat", "/proc/net/snmp6"), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			out[f[0]], _ = strconv.Atoi(f[1])
		}
	}
	return out
}

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
