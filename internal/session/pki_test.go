package session

import (
	"testing"

	"github.com/segchain/segchain/internal/pki"
)

// testCA is a fresh CA named name in a temporary directory, with a
// certificate issued for each role:name pair of certs; it returns the
// directory.
func testCA(t *testing.T, name string, certs ...[2]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := pki.Init(dir, name); err != nil {
		t.Fatal(err)
	}
	for _, c := range certs {
		if _, err := pki.Issue(dir, c[0], c[1], pki.IssueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ctlAndN1 are the controller "ctl" and the node "n1" most of these tests
// run with.
var ctlAndN1 = [][2]string{{pki.RoleController, "ctl"}, {pki.RoleNode, "n1"}}
