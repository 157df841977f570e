package session

import (
	"crypto/tls"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/pki"
)

// The controller's key exchange with its agents is crypto/tls's hybrid
// (X25519 with ML-KEM-768) unless ClassicalKEXEnv=1 asks for X25519
// alone; a resumed handshake exchanges keys the same way.
func TestClassicalKEX(t *testing.T) {
	t.Setenv(HybridResumedEnv, "1") // the hybrid on resumption too (TestResumedKEX)
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

// A handshake that offers a kept ticket exchanges keys by X25519 alone;
// every full handshake is the hybrid: a ticket the agent refuses (it
// restarted) makes the handshake a full one with X25519, which is
// dropped before any call and dialled again with the hybrid, and the
// ticket then kept is the hybrid one's (resumekex.go).
func TestResumedKEX(t *testing.T) {
	dir := testCA(t, "rkex", ctlAndN1...)
	type hs struct {
		curve   tls.CurveID
		resumed bool
	}
	var (
		mu   sync.Mutex
		seen []hs
	)
	agent := func(key byte) string {
		tc, err := pki.ServerTLSAllow(pki.DirFiles(dir, pki.RoleNode, "n1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		tc.SetSessionTicketKeys([][32]byte{{key}})
		verify := tc.VerifyConnection
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			mu.Lock()
			seen = append(seen, hs{cs.CurveID, cs.DidResume})
			mu.Unlock()
			return verify(cs)
		}
		return ticketAgent(t, "n1", tc)
	}
	// take waits for n handshakes (or 5 s): the agent sees the refused
	// ticket's handshake finish after the controller has closed it and
	// moved on, so its record can lag the command.
	take := func(n int) []hs {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			if len(seen) >= n || time.Now().After(deadline) {
				out := seen
				seen = nil
				mu.Unlock()
				return out
			}
			mu.Unlock()
		}
	}
	full := hs{tls.X25519MLKEM768, false}
	addr := agent(1)
	restarted := agent(2) // another agent process on the same host: other ticket keys
	for i, c := range []struct {
		addr, env string
		want      []hs
	}{
		{addr, "", []hs{full}},
		{addr, "", []hs{{tls.X25519, true}}},
		{addr, "", []hs{{tls.X25519, true}}},
		{restarted, "", []hs{{tls.X25519, false}, full}},
		{restarted, "", []hs{{tls.X25519, true}}},
		{restarted, "1", []hs{{tls.X25519MLKEM768, true}}},
	} {
		t.Setenv(HybridResumedEnv, c.env)
		if _, err := dialTickets(t, dir, "ctl", c.addr); err != nil {
			t.Fatalf("command %d: %v", i+1, err)
		}
		// In any order: the agent serves the dropped handshake and the
		// one dialled after it concurrently.
		order := func(a, b hs) int {
			if a.curve != b.curve {
				return int(a.curve) - int(b.curve)
			}
			if a.resumed == b.resumed {
				return 0
			}
			if a.resumed {
				return 1
			}
			return -1
		}
		got := take(len(c.want))
		want := slices.Clone(c.want)
		slices.SortFunc(got, order)
		slices.SortFunc(want, order)
		if !slices.Equal(got, want) {
			t.Errorf("command %d (%s=%q): the agent saw handshakes %v, want %v", i+1, HybridResumedEnv, c.env, got, c.want)
		}
	}
}
