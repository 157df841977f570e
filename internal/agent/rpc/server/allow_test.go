package server

import (
	"context"
	"testing"

	"github.com/segchain/segchain/internal/pki"
)

// An agent with an allowlist of controllers (--allow-controller) refuses,
// over real gRPC and mTLS on a loopback socket, a controller certificate
// of the domain CA that it does not name, saying which; the controller it
// names is served.
func TestAllowController(t *testing.T) {
	dir, _ := newPKI(t) // node nfv1, controller ctl
	if _, err := pki.Issue(dir, pki.RoleController, "ci", pki.IssueOptions{}); err != nil {
		t.Fatal(err)
	}
	tc, err := pki.ServerTLSAllow(pki.DirFiles(dir, pki.RoleNode, "nfv1"), []string{"ctl"})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, dir, tc)
	refused(t, e, e.client(t, pki.DirFiles(dir, pki.RoleController, "ci"), "nfv1"),
		"not in the agent's --allow-controller list", `controller \"ci\" is not allowed to control this node`)
	if err := e.client(t, pki.DirFiles(dir, pki.RoleController, "ctl"), "nfv1").Preflight(context.Background()); err != nil {
		t.Fatalf("the allowed controller: %v", err)
	}
}
