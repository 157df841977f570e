package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Roles a certificate can carry.
const (
	RoleNode       = "node"
	RoleController = "controller"
)

// File names in a PKI directory.
const (
	CACert = "ca.crt"
	CAKey  = "ca.key"
)

// Validity defaults.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 2 * 365 * 24 * time.Hour
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Files are the PEM files of one party: the domain CA it trusts and its
// own certificate and key.
type Files struct {
	CA   string `json:"ca"`
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// DirFiles are the files of role/name in a PKI directory made by Init and
// Issue: ca.crt, and node-NAME.crt/.key or controller-NAME.crt/.key.
func DirFiles(dir, role, name string) Files {
	base := filepath.Join(dir, role+"-"+name)
	return Files{CA: filepath.Join(dir, CACert), Cert: base + ".crt", Key: base + ".key"}
}

// URI is the SAN naming role/name.
func URI(role, name string) *url.URL {
	return &url.URL{Scheme: "segchain", Host: role, Path: "/" + name}
}

// Identity reads the role and name of a certificate from its segchain URI
// SAN.
func Identity(c *x509.Certificate) (role, name string, ok bool) {
	for _, u := range c.URIs {
		if u.Scheme == "segchain" && len(u.Path) > 1 {
			return u.Host, u.Path[1:], true
		}
	}
	return "", "", false
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// Init creates a domain CA in dir (ca.crt, ca.key, mode 0600). It refuses
// to overwrite an existing CA.
func Init(dir, domain string) error {
	if _, err := os.Stat(filepath.Join(dir, CAKey)); err == nil {
		return fmt.Errorf("pki init: %s already holds a CA (%s): remove it first to start a new domain CA", dir, CAKey)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki init: %w", err)
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "segchain domain CA " + domain, Organization: []string{"segchain"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("pki init: %w", err)
	}
	if err := writeKey(filepath.Join(dir, CAKey), key); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, CACert), "CERTIFICATE", der)
}

// IssueOptions bound the certificate's validity (zero: now for two years)
// and add IP or DNS SANs (informational: the agent is verified by its URI).
type IssueOptions struct {
	NotBefore, NotAfter time.Time
	Hosts               []string
}

// Issue signs a certificate for role/name with the CA in dir and writes
// it as DirFiles(dir, role, name) (mode 0600).
func Issue(dir, role, name string, o IssueOptions) (Files, error) {
	f := DirFiles(dir, role, name)
	if role != RoleNode && role != RoleController {
		return f, fmt.Errorf("pki issue: role %q: want node or controller", role)
	}
	if !nameRE.MatchString(name) {
		return f, fmt.Errorf("pki issue: name %q: want letters, digits, '.', '_' or '-' (at most 63)", name)
	}
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return f, err
	}
	key, err := newKey()
	if err != nil {
		return f, err
	}
	sn, err := serial()
	if err != nil {
		return f, err
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Minute)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = o.NotBefore.Add(CertValidity)
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: name, OrganizationalUnit: []string{role}, Organization: []string{"segchain"}},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		URIs:         []*url.URL{URI(role, name)},
	}
	if role == RoleNode {
		// An agent serves (server auth); it is never a client of another.
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return f, fmt.Errorf("pki issue: %w", err)
	}
	if err := writeKey(f.Key, key); err != nil {
		return f, err
	}
	return f, writePEM(f.Cert, "CERTIFICATE", der)
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certs, err := readCerts(filepath.Join(dir, CACert))
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w (run segchain pki init first)", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, CAKey))
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, nil, fmt.Errorf("pki: %s: no PEM block", filepath.Join(dir, CAKey))
	}
	key, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %s: %w", filepath.Join(dir, CAKey), err)
	}
	return certs[0], key, nil
}

func readCerts(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no certificate", path)
	}
	return out, nil
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

// writePEM writes one block, mode 0600, atomically (rename).
func writePEM(path, typ string, der []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	err = pem.Encode(f, &pem.Block{Type: typ, Bytes: der})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	return nil
}

func pool(path string) (*x509.CertPool, error) {
	certs, err := readCerts(path)
	if err != nil {
		return nil, fmt.Errorf("pki: CA: %w", err)
	}
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p, nil
}

func (f Files) load() (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return cert, nil, fmt.Errorf("pki: %w", err)
	}
	p, err := pool(f.CA)
	return cert, p, err
}

// ErrRole is a peer certificate of the wrong role or name.
var ErrRole = errors.New("certificate role")

// ServerTLS is the agent's TLS: it presents the node certificate and
// accepts only clients whose certificate the domain CA signed for the
// controller role.
func ServerTLS(f Files) (*tls.Config, error) { return ServerTLSAllow(f, nil) }

// ServerTLSAllow is ServerTLS accepting, when allow is not empty, only the
// controllers it names (the name of their certificate's segchain URI,
// `segchain pki issue --controller NAME`): any other certificate of the
// domain CA is refused in the handshake.
func ServerTLSAllow(f Files, allow []string) (*tls.Config, error) {
	cert, p, err := f.load()
	if err != nil {
		return nil, err
	}
	allowed := map[string]bool{}
	for _, n := range allow {
		allowed[n] = true
	}
	check := func(chains [][]*x509.Certificate) error {
		if len(chains) == 0 || len(chains[0]) == 0 {
			return fmt.Errorf("%w: no verified client certificate", ErrRole)
		}
		role, name, ok := Identity(chains[0][0])
		if !ok || role != RoleController {
			return fmt.Errorf("%w: client certificate %q is not a controller's (role %q)", ErrRole, chains[0][0].Subject.CommonName, role)
		}
		if len(allowed) > 0 && !allowed[name] {
			return fmt.Errorf("%w: controller %q is not allowed to control this node (--allow-controller)", ErrRole, name)
		}
		return nil
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p,
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			return check(chains)
		},
		// Also on a connection resumed from a session ticket (controllers
		// keep theirs across commands), where crypto/tls skips
		// VerifyPeerCertificate: the chain the ticket carries is checked
		// again.
		VerifyConnection: func(cs tls.ConnectionState) error {
			return check(cs.VerifiedChains)
		},
	}, nil
}

// ClientTLS is the controller's TLS toward the agent of node: it presents
// the controller certificate and accepts only a server certificate the
// domain CA signed for that node (URI segchain://node/NODE), whatever
// address it was reached at.
func ClientTLS(f Files, node string) (*tls.Config, error) {
	per, err := ClientTLSPerNode(f)
	if err != nil {
		return nil, err
	}
	return per(node), nil
}

// ClientTLSPerNode reads the controller's files once and returns
// ClientTLS's configuration for any node: a controller that dials a
// thousand agents parses its key and CA once, not per agent.
func ClientTLSPerNode(f Files) (func(node string) *tls.Config, error) {
	cert, p, err := f.load()
	if err != nil {
		return nil, err
	}
	return func(node string) *tls.Config { return clientTLS(cert, p, node) }, nil
}

func clientTLS(cert tls.Certificate, p *x509.CertPool, node string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		// The agent is named by its URI SAN, not by the host name it is
		// reached at: the chain and the name are verified below instead.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("agent presented no certificate")
			}
			leaf := cs.PeerCertificates[0]
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: p, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return fmt.Errorf("agent certificate of node %s: %w", node, err)
			}
			role, name, ok := Identity(leaf)
			if !ok || role != RoleNode {
				return fmt.Errorf("%w: agent certificate %q is not a node's (role %q)", ErrRole, leaf.Subject.CommonName, role)
			}
			if name != node {
				return fmt.Errorf("%w: agent certificate names node %q, want %q", ErrRole, name, node)
			}
			return nil
		},
	}
}
