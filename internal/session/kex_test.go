package session

import (
	"crypto/tls"
	"sync"
	"testing"

	"github.com/segchain/segchain/internal/pki"
)

// The controller's key exchange with its agents is crypto/tls's hybrid
// (X25519 with ML-KEM-768) unless ClassicalKEXEnv=1 asks for X25519
// alone; a resumed handshake exchanges keys the same way.
func TestClassicalKEX(t *testing.T) {
	dir := testCA(t, "kex", ctlAndN1...)
	tc, err := pki.ServerTLSAllow(pki.DirFiles(dir, pki.RoleNode, "n1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		curves []tls.CurveID
	)
	verify := tc.VerifyConnection
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		mu.Lock()
		curves = append(curves, cs.CurveID)
		mu.Unlock()
		return verify(cs)
	}
	addr := ticketAgent(t, "n1", tc)
	last := func() tls.CurveID {
		mu.Lock()
		defer mu.Unlock()
		if len(curves) == 0 {
			t.Fatal("no handshake")
		}
		return curves[len(curves)-1]
	}
	for i, c := range []struct {
		env     string
		resumed bool
		want    tls.CurveID
	}{
		{"", false, tls.X25519MLKEM768},
		{"", true, tls.X25519MLKEM768},
		{"1", true, tls.X25519},
		{"", true, tls.X25519MLKEM768},
	} {
		t.Setenv(ClassicalKEXEnv, c.env)
		resumed, err := dialTickets(t, dir, "ctl", addr)
		if err != nil {
			t.Fatal(err)
		}
		if resumed != c.resumed {
			t.Errorf("command %d: resumed %v, want %v", i+1, resumed, c.resumed)
		}
		if got := last(); got != c.want {
			t.Errorf("command %d (%s=%q): key exchange %v, want %v", i+1, ClassicalKEXEnv, c.env, got, c.want)
		}
	}
}
