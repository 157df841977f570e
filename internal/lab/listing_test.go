package lab

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// `lab exec R -- vtysh ...` reaches R's own FRR; other commands, nodes
// without FRR and a vtysh told its socket already are left alone.
func TestExecArgv(t *testing.T) {
	l := &Lab{FRR: map[string]string{"r1": "/run/segchain/labs/x.frr/r1"}}
	for _, tc := range []struct {
		node string
		argv []string
		want []string
	}{
		{"r1", []string{"vtysh", "-c", "show bgp summary"}, []string{"vtysh", "--vty_socket", "/run/segchain/labs/x.frr/r1", "-c", "show bgp summary"}},
		{"r1", []string{"/usr/bin/vtysh"}, []string{"/usr/bin/vtysh", "--vty_socket", "/run/segchain/labs/x.frr/r1"}},
		{"r1", []string{"vtysh", "--vty_socket=/tmp/v"}, []string{"vtysh", "--vty_socket=/tmp/v"}},
		{"r1", []string{"vtysh", "-N", "other"}, []string{"vtysh", "-N", "other"}},
		{"r1", []string{"ip", "-6", "route"}, []string{"ip", "-6", "route"}},
		{"s", []string{"vtysh"}, []string{"vtysh"}},
	} {
		if diff := cmp.Diff(tc.want, l.ExecArgv(tc.node, tc.argv)); diff != "" {
			t.Errorf("ExecArgv(%s, %q) (-want +got):\n%s", tc.node, tc.argv, diff)
		}
	}
}
