package session

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/pki"
)

// A resumed connection's agent chain, verified when its ticket was kept
// against the same CA, is not verified again (its signatures); a ticket
// kept under another CA (or by an older build) is.
func TestResumedChainKeptVerified(t *testing.T) {
	dir := testCA(t, "kept", ctlAndN1...)
	tc, err := pki.ServerTLSAllow(pki.DirFiles(dir, pki.RoleNode, "n1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := ticketAgent(t, "n1", tc)
	f := pki.DirFiles(dir, pki.RoleController, "ctl")
	command := func() (resumed bool, kept int64) {
		t.Helper()
		d := &config.Domain{Nodes: map[string]*config.Node{"n1": {Agent: addr}},
			Security: config.Security{PKI: &config.PKI{CA: f.CA, Cert: f.Cert, Key: f.Key}}}
		remote, tk, err := remoteAgents(d, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer remote["n1"].Close()
		if err := remote["n1"].Preflight(context.Background()); err != nil {
			t.Fatal(err)
		}
		return tk.resumed.Load() > 0, tk.kept.Load()
	}
	if resumed, kept := command(); resumed || kept != 0 {
		t.Fatalf("first command: resumed %v, %d kept chain(s) (want a full handshake)", resumed, kept)
	}
	for i := 0; i < 2; i++ {
		if resumed, kept := command(); !resumed || kept != 1 {
			t.Fatalf("command %d: resumed %v, %d chain(s) taken as verified (want resumed, 1)", i+2, resumed, kept)
		}
	}
	// The ticket says another CA (or nothing: an older build's, in its
	// JSON form): the chain is verified again, and the session still
	// resumed.
	files, _ := filepath.Glob(filepath.Join(ticketDir(f.Key), "*"))
	if len(files) != 1 {
		t.Fatalf("%d ticket files, want 1", len(files))
	}
	for _, other := range []string{"0123", ""} {
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte(ticketMagic)) {
			t.Fatalf("ticket file not in the binary form: %q…", b[:min(len(b), 8)])
		}
		tf, err := decodeTicketFile(b)
		if err != nil {
			t.Fatal(err)
		}
		tf.Verified = other
		b = tf.encode()
		if other == "" {
			if b, err = json.Marshal(tf); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(files[0], b, 0o600); err != nil {
			t.Fatal(err)
		}
		if resumed, kept := command(); !resumed || kept != 0 {
			t.Errorf("ticket verified under CA %q: resumed %v, %d chain(s) taken as verified (want resumed, 0)", other, resumed, kept)
		}
	}
}

// What a kept chain is still checked for: the node's name and role, and
// every certificate's validity now.
func TestKeptChain(t *testing.T) {
	dir := testCA(t, "kept")
	load := func(role, name string) *x509.Certificate {
		t.Helper()
		if _, err := pki.Issue(dir, role, name, pki.IssueOptions{}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(pki.DirFiles(dir, role, name).Cert)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	n1, ctl := load(pki.RoleNode, "n1"), load(pki.RoleController, "ctl")
	now := time.Now()
	cs := func(c *x509.Certificate) tls.ConnectionState {
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
	}
	if err := keptChain(cs(n1), "n1", now); err != nil {
		t.Errorf("node n1's certificate: %v", err)
	}
	if err := keptChain(cs(n1), "n2", now); !errors.Is(err, pki.ErrRole) {
		t.Errorf("n1's certificate for node n2: %v, want a role error", err)
	}
	if err := keptChain(cs(ctl), "ctl", now); !errors.Is(err, pki.ErrRole) {
		t.Errorf("a controller's certificate: %v, want a role error", err)
	}
	if err := keptChain(cs(n1), "n1", n1.NotAfter.Add(time.Second)); err == nil {
		t.Error("an expired certificate accepted")
	}
	if err := keptChain(cs(n1), "n1", n1.NotBefore.Add(-time.Second)); err == nil {
		t.Error("a certificate not yet valid accepted")
	}
	if err := keptChain(tls.ConnectionState{}, "n1", now); err == nil {
		t.Error("no certificate accepted")
	}
}

// A ticket file's binary form reads back as written; an older build's
// JSON form is read too; a garbled file is an error (a miss: a full
// handshake), never a crash.
func TestTicketFileForm(t *testing.T) {
	f := ticketFile{Ticket: []byte("ticket"), State: bytes.Repeat([]byte{0xa5}, 300), Verified: "ca"}
	b := f.encode()
	if got, err := decodeTicketFile(b); err != nil || !bytes.Equal(got.Ticket, f.Ticket) || !bytes.Equal(got.State, f.State) || got.Verified != f.Verified {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	j, _ := json.Marshal(f)
	if got, err := decodeTicketFile(j); err != nil || !bytes.Equal(got.State, f.State) || got.Verified != "ca" {
		t.Fatalf("JSON form: %+v, %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"truncated":  b[:len(b)-1],
		"trailing":   append(append([]byte{}, b...), 0),
		"magic only": []byte(ticketMagic),
		"too long":   append([]byte(ticketMagic), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"not JSON":   []byte("garbage"),
	} {
		if _, err := decodeTicketFile(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
