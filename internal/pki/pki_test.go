package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInitIssue(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir, "d"); err != nil {
		t.Fatal(err)
	}
	if err := Init(dir, "d"); err == nil || !strings.Contains(err.Error(), "already holds a CA") {
		t.Fatalf("second init: %v", err)
	}
	f, err := Issue(dir, RoleNode, "nfv1", IssueOptions{Hosts: []string{"10.0.0.1", "nfv1.example"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f.Cert, f.Key, filepath.Join(dir, CAKey), filepath.Join(dir, CACert)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	b, _ := os.ReadFile(f.Cert)
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if role, name, ok := Identity(c); !ok || role != RoleNode || name != "nfv1" {
		t.Errorf("identity %q %q %v", role, name, ok)
	}
	if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", c.PublicKey)
	}
	if len(c.IPAddresses) != 1 || len(c.DNSNames) != 1 {
		t.Errorf("SANs: %v %v", c.IPAddresses, c.DNSNames)
	}
	for _, bad := range []struct{ role, name string }{{"admin", "x"}, {RoleNode, "../x"}, {RoleNode, ""}} {
		if _, err := Issue(dir, bad.role, bad.name, IssueOptions{}); err == nil {
			t.Errorf("issue %q %q accepted", bad.role, bad.name)
		}
	}
	if _, err := Issue(t.TempDir(), RoleNode, "x", IssueOptions{}); err == nil || !strings.Contains(err.Error(), "pki init") {
		t.Errorf("issue without a CA: %v", err)
	}
}
