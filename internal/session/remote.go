package session

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/pki"
)

// Remote nodes: a node with an agent address (nodes.NAME.agent, or a lab
// brought up with --agents) is programmed through its agent over gRPC.

// remoteAgents dials the agent of every node that has one: the lab's
// agents (lab up --agents, with the lab's PKI) or the domain's
// nodes.NAME.agent (with security.pki).
func remoteAgents(d *config.Domain, l *lab.Lab, only map[string]bool) (map[string]*client.Client, *tickets, error) {
	return remoteAgentsEach(d, l, only, nil)
}

// remoteAgentsEach is remoteAgents calling made, if set, with each client
// as soon as it is made (warm.go sets its connection up meanwhile).
func remoteAgentsEach(d *config.Domain, l *lab.Lab, only map[string]bool, made func(*client.Client)) (map[string]*client.Client, *tickets, error) {
	out := map[string]*client.Client{}
	// The controller's files are read once, at the first node dialled
	// (none: --changed-only with nothing changed reads none).
	var (
		perNode func(string) *tls.Config
		tk      *tickets
	)
	dial := func(node, addr string, files pki.Files) error {
		if only != nil && !only[node] {
			return nil // outside the apply's scope (--changed-only)
		}
		if perNode == nil {
			var err error
			if perNode, err = pki.ClientTLSPerNode(files); err != nil {
				return fmt.Errorf("node %s: %w", node, err)
			}
			if c := perNode(node); len(c.Certificates) > 0 {
				if tk = newTickets(ticketDir(files.Key), c.Certificates[0]); tk != nil {
					tk.ca = caDigest(files.CA)
				}
			}
		}
		tc := perNode(node)
		if classicalKEX() {
			tc.CurvePreferences = []tls.CurveID{tls.X25519}
		}
		if tk != nil {
			// Resumed from the last command's ticket (tickets.go).
			nt := tk.forNode(node)
			tc.ClientSessionCache = nt
			verify := tc.VerifyConnection
			tc.VerifyConnection = func(cs tls.ConnectionState) error {
				if cs.DidResume && nt.keptVerified(tk.ca) {
					// The chain kept with the ticket, verified then
					// against this CA (tickets.go).
					if err := keptChain(cs, node, time.Now()); err != nil {
						return err
					}
					tk.kept.Add(1)
				} else if err := verify(cs); err != nil {
					return err
				}
				if cs.DidResume {
					tk.resumed.Add(1)
					nt.resumed.Store(true)
				}
				return nil
			}
		}
		var (
			c   *client.Client
			err error
		)
		if tk != nil && !classicalKEX() && !hybridResumed() {
			// X25519 alone when resuming (resumekex.go).
			c, err = client.DialCreds(node, addr, newResumeCreds(tc, tc.ClientSessionCache.(*nodeTickets)))
		} else {
			c, err = client.Dial(node, addr, tc)
		}
		if err != nil {
			return err
		}
		c.SetHint(agentHint(l, node))
		out[node] = c
		if made != nil {
			made(c)
		}
		return nil
	}
	var errs []error
	if l != nil && len(l.Agents) > 0 {
		files := pki.DirFiles(l.AgentPKI, pki.RoleController, lab.ControllerName)
		for _, n := range l.NodeNames() {
			if a, ok := l.Agents[n]; ok && d.Nodes[n] != nil {
				errs = append(errs, dial(n, a.Addr, files))
			}
		}
		return out, tk, errors.Join(errs...)
	}
	ca, cert, key := d.PKIFiles()
	files := pki.Files{CA: ca, Cert: cert, Key: key}
	for _, n := range d.NodeNames() {
		if a := d.Nodes[n].Agent; a != "" {
			errs = append(errs, dial(n, a, files))
		}
	}
	return out, tk, errors.Join(errs...)
}

// agentHint is what an unreachable agent's error adds: how to see it and
// bring it back, in a lab (its supervisor) or on a host (systemd).
func agentHint(l *lab.Lab, node string) string {
	if l != nil && len(l.Agents) > 0 {
		return fmt.Sprintf("is it running? `segchain lab ls --lab %s` shows its state and log (the lab's supervisor restarts an agent that exits, with backoff); `segchain lab restart-agents --lab %s %s` starts it again",
			l.Name, l.Name, node)
	}
	return "is `segchain agent` running on that host? `systemctl status segchain-agent` there shows it, `systemctl restart segchain-agent` starts it again (docs/deploy.md)"
}

// ClassicalKEXEnv=1 makes the controller's handshakes with its agents
// exchange keys by X25519 alone instead of crypto/tls's default hybrid
// X25519MLKEM768 (docs/security.md, docs/scale.md): a fifth less of each
// side's handshake CPU, at the price of the post-quantum half of the
// exchange — traffic recorded now (intents, HMAC secrets) could be
// decrypted by whoever breaks X25519 later. Off by default.
const ClassicalKEXEnv = "SEGCHAIN_TLS_CLASSICAL_KEX"

func classicalKEX() bool { return os.Getenv(ClassicalKEXEnv) == "1" }
