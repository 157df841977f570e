package session

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/segchain/segchain/internal/pki"
)

// TLS session resumption across commands. Each command is a new process
// that dials every agent with a full TLS 1.3 handshake: both certificates
// sent, parsed and verified, a signature made and checked on each side —
// a third of a no-op apply's CPU on the controller and a fifth on the
// agents (docs/scale.md). The agents issue session tickets (crypto/tls
// does by default); the controller keeps each agent's last ticket in a
// file beside its key, and the next command resumes with it (PSK with a
// fresh ECDHE/ML-KEM key exchange: forward secrecy is kept; only the
// certificates' exchange is skipped).
//
// What still holds on a resumed connection:
//   - the agent decrypts the ticket with keys only its own process has
//     (a restarted agent cannot, and the handshake is a full one), and it
//     carries the controller's certificate chain the agent verified when
//     the ticket was issued; the agent checks that chain still leads to
//     its CA and has not expired, and pki's VerifyConnection checks its
//     role and --allow-controller again;
//   - the controller runs its VerifyConnection (pki.ClientTLSPerNode) on
//     the agent's certificate kept with the ticket: the CA chain and the
//     node's name, as on a full handshake;
//   - crypto/tls bounds a ticket's life to 7 days from the full handshake
//     it came from.
//
// A ticket file is as secret as the controller's key (it lets its holder
// resume the controller's sessions): 0600 in a 0700 directory next to the
// key, named after the controller's certificate and the node, so that two
// controllers' keys in one directory never share tickets. Anything wrong
// with a file (unreadable, garbled, another Go's format) is a miss: a
// full handshake, and the file replaced.

// NoTicketsEnv=1 turns resumption off (every command a full handshake):
// the A/B arm of docs/benchmarks.md's #33 section.
const NoTicketsEnv = "SEGCHAIN_NO_TLS_TICKETS"

// ticketDir is where the tickets of the controller whose key is keyFile
// are kept.
func ticketDir(keyFile string) string {
	return filepath.Join(filepath.Dir(keyFile), "tls-sessions")
}

// tickets are one controller's kept tickets, one file per agent.
type tickets struct {
	dir  string
	cert string // a digest of the controller's certificate
	// offered and missed count the handshakes that offered a kept ticket
	// and those that found none, resumed those the agent resumed, written
	// the tickets written (tests).
	offered, missed, resumed, written atomic.Int64
	// ca is a digest of the domain CA's file (keptVerified); kept counts
	// the resumed connections whose chain was checked that way (tests).
	ca   string
	kept atomic.Int64
	// classical counts the handshakes resumed with X25519 alone,
	// redialled those whose ticket was refused (resumekex.go; tests).
	classical, redialled atomic.Int64
}

// newTickets keeps the tickets of the controller presenting cert in dir;
// nil when resumption is off.
func newTickets(dir string, cert tls.Certificate) *tickets {
	if os.Getenv(NoTicketsEnv) == "1" || len(cert.Certificate) == 0 {
		return nil
	}
	h := sha256.Sum256(cert.Certificate[0])
	return &tickets{dir: dir, cert: hex.EncodeToString(h[:8])}
}

// forNode is the session cache of node's connections.
func (t *tickets) forNode(node string) *nodeTickets {
	return &nodeTickets{t: t, node: node}
}

// nodeTickets is one agent's ticket (tls.ClientSessionCache): the cache key
// crypto/tls passes (the server name or address) is part of the file's
// name, so a node moved to another address starts afresh.
type nodeTickets struct {
	t    *tickets
	node string
	// loadedAt is when the ticket Get handed was written; resumed is set
	// when the agent accepted it (remote.go): Put then keeps that file
	// while it is younger than ticketRefresh.
	loadedAt atomic.Int64 // unix nanoseconds
	resumed  atomic.Bool
	// verifiedCA is the ticket's Verified.
	verifiedCA atomic.Value // string
}

// ticketRefresh is how long a ticket is offered again before the agent's
// newer one replaces it: writing each agent's new ticket after every
// command was a fifth of a no-op apply's CPU on the controller (a file
// created per node). crypto/tls accepts a ticket again within its life
// (7 days from the full handshake, the agent's ticket keys rotated
// daily); an hour keeps it well inside that.
const ticketRefresh = time.Hour

type ticketFile struct {
	Ticket []byte `json:"ticket"`
	State  []byte `json:"state"`
	// Verified is tickets.ca when the ticket was kept: the agent's chain
	// in State passed VerifyConnection against that CA (a ticket is
	// kept only from a connection whose handshake passed it).
	Verified string `json:"verified,omitempty"`
}

// ticketMagic starts a ticket file in the binary form (encode): three
// fields, each a uvarint length and its bytes. Files before session 14
// are JSON (base64 inside, decoded by reflection: 40 % of reading a
// ticket, read once per agent per command), still read.
const ticketMagic = "SCT1"

// maxTicketField bounds a field's length (a ticket, a session state with
// the agent's chain): anything longer is a garbled file.
const maxTicketField = 1 << 20

func (f ticketFile) encode() []byte {
	b := make([]byte, 0, len(ticketMagic)+len(f.Ticket)+len(f.State)+len(f.Verified)+3*binary.MaxVarintLen64)
	b = append(b, ticketMagic...)
	for _, field := range [][]byte{f.Ticket, f.State, []byte(f.Verified)} {
		b = binary.AppendUvarint(b, uint64(len(field)))
		b = append(b, field...)
	}
	return b
}

func decodeTicketFile(b []byte) (ticketFile, error) {
	var f ticketFile
	rest, ok := bytes.CutPrefix(b, []byte(ticketMagic))
	if !ok {
		err := json.Unmarshal(b, &f) // an older build's
		return f, err
	}
	var fields [3][]byte
	for i := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > maxTicketField || n > uint64(len(rest)-k) {
			return ticketFile{}, errors.New("garbled ticket file")
		}
		fields[i], rest = rest[k:k+int(n)], rest[k+int(n):]
	}
	if len(rest) != 0 {
		return ticketFile{}, errors.New("garbled ticket file: trailing bytes")
	}
	return ticketFile{Ticket: fields[0], State: fields[1], Verified: string(fields[2])}, nil
}

func (n *nodeTickets) path(key string) string {
	h := sha256.Sum256([]byte(n.node + "\x00" + key))
	return filepath.Join(n.t.dir, n.t.cert+"-"+hex.EncodeToString(h[:8]))
}

// has: a ticket is kept for the cache key (resumekex.go).
func (n *nodeTickets) has(key string) bool {
	_, err := os.Stat(n.path(key))
	return err == nil
}

// Get implements tls.ClientSessionCache.
func (n *nodeTickets) Get(key string) (*tls.ClientSessionState, bool) {
	p := n.path(key)
	b, mtime, err := readTicket(p)
	if err != nil {
		n.t.missed.Add(1)
		return nil, false
	}
	f, err := decodeTicketFile(b)
	if err != nil {
		n.t.missed.Add(1)
		return nil, false
	}
	st, err := tls.ParseSessionState(f.State)
	if err != nil {
		n.t.missed.Add(1)
		return nil, false
	}
	cs, err := tls.NewResumptionState(f.Ticket, st)
	if err != nil {
		n.t.missed.Add(1)
		return nil, false
	}
	n.t.offered.Add(1)
	n.loadedAt.Store(mtime.UnixNano())
	n.verifiedCA.Store(f.Verified)
	return cs, true
}

// readTicket reads a ticket file and its modification time: one open,
// fstat and read.
func readTicket(p string) ([]byte, time.Time, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	if fi.Size() > 4*maxTicketField {
		return nil, time.Time{}, errors.New("ticket file too large")
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, time.Time{}, err
	}
	return b, fi.ModTime(), nil
}

// Put implements tls.ClientSessionCache: the agent's newest ticket
// replaces the file (nil: the ticket was refused or expired, removed).
func (n *nodeTickets) Put(key string, cs *tls.ClientSessionState) {
	p := n.path(key)
	if cs == nil {
		os.Remove(p)
		return
	}
	if n.resumed.Load() && time.Since(time.Unix(0, n.loadedAt.Load())) < ticketRefresh {
		return // the kept ticket was accepted, and is recent
	}
	n.t.written.Add(1)
	ticket, st, err := cs.ResumptionState()
	if err != nil || st == nil {
		return
	}
	sb, err := st.Bytes()
	if err != nil {
		return
	}
	b := ticketFile{Ticket: ticket, State: sb, Verified: n.t.ca}.encode()
	if os.MkdirAll(n.t.dir, 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(n.t.dir, ".tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return
	}
	if os.Rename(tmp.Name(), p) != nil {
		os.Remove(tmp.Name())
	}
}

// keptVerified: the resumed connection's agent chain is the one kept with
// the ticket, verified against the CA whose digest is ca when the ticket
// was kept: its signatures are not checked again (x509's Verify was 5 %
// of a no-op's controller CPU). Checking them again would not guard the
// ticket file either: whoever can write it can put there any agent's
// real chain (certificates are public) with a key of their own; the file
// is as secret as the controller's key beside it.
func (n *nodeTickets) keptVerified(ca string) bool {
	v, _ := n.verifiedCA.Load().(string)
	return ca != "" && v == ca
}

// keptChain is what a resumed connection's chain, verified when its
// ticket was kept (keptVerified), is still checked for: each certificate
// within its validity at now, and the leaf a node's, naming node.
func keptChain(cs tls.ConnectionState, node string, now time.Time) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("agent presented no certificate")
	}
	for _, c := range cs.PeerCertificates {
		if now.Before(c.NotBefore) || now.After(c.NotAfter) {
			return fmt.Errorf("agent certificate of node %s: %q is not valid at %s (valid %s to %s)",
				node, c.Subject.CommonName, now.UTC().Format(time.RFC3339), c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	leaf := cs.PeerCertificates[0]
	role, name, ok := pki.Identity(leaf)
	if !ok || role != pki.RoleNode {
		return fmt.Errorf("%w: agent certificate %q is not a node's (role %q)", pki.ErrRole, leaf.Subject.CommonName, role)
	}
	if name != node {
		return fmt.Errorf("%w: agent certificate names node %q, want %q", pki.ErrRole, name, node)
	}
	return nil
}

// caDigest is a digest of the CA file's content ("" when unreadable: no
// chain is then taken as verified).
func caDigest(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
