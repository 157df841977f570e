package session

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc/credentials"
)

// The key exchange of a resumed handshake (docs/scale.md, session 13).
//
// crypto/tls's default key exchange is the hybrid X25519MLKEM768: every
// handshake, resumed ones included, generates an ML-KEM-768 key on the
// controller, encapsulates to it on the agent and decapsulates on the
// controller (a tenth of a no-op's CPU on each side). A resumed
// handshake's keys depend on the ticket's secret as well as on its own
// exchange, and the ticket's secret comes from the full handshake that
// issued it: when that one was hybrid, an adversary who can later break
// X25519 but not ML-KEM cannot derive the resumed connection's keys from
// what it recorded. So a handshake that offers a kept ticket offers X25519
// alone, and every full handshake stays hybrid:
//
//   - no kept ticket: the hybrid, as ever;
//   - a kept ticket the agent accepts: X25519 with the ticket's secret;
//   - a kept ticket the agent refuses (it restarted: its ticket keys are
//     gone) makes the handshake a full one with X25519 alone: that
//     connection is closed before anything is sent over it or its ticket
//     kept, the ticket file removed, and the agent dialled again with the
//     hybrid (one more handshake per agent restart).
//
// What it gives up: the resumed sessions' post-quantum forward secrecy
// against a later theft of the ticket's secret (the controller's ticket
// file, as secret as its key beside it, or the agent process's ticket
// keys): with the ticket and a quantum computer, recorded resumed traffic
// could be decrypted; with the hybrid it could not.
// HybridResumedEnv=1 keeps the hybrid on resumed handshakes too.
const HybridResumedEnv = "SEGCHAIN_TLS_HYBRID_RESUMED"

func hybridResumed() bool { return os.Getenv(HybridResumedEnv) == "1" }

// resumeCreds are node's connection credentials: X25519 alone when a
// ticket is kept (tls X25519 config classical), hybrid otherwise.
type resumeCreds struct {
	credentials.TransportCredentials // the hybrid's (tc as configured)
	classical                        credentials.TransportCredentials
	tc                               *tls.Config
	nt                               *nodeTickets
}

func newResumeCreds(tc *tls.Config, nt *nodeTickets) *resumeCreds {
	ctc := tc.Clone()
	ctc.CurvePreferences = []tls.CurveID{tls.X25519}
	return &resumeCreds{
		TransportCredentials: credentials.NewTLS(tc),
		classical:            credentials.NewTLS(ctc),
		tc:                   tc,
		nt:                   nt,
	}
}

// cacheKey is the key crypto/tls gives the session cache: the config's
// server name, which grpc-go sets to the authority's host when empty.
func (r *resumeCreds) cacheKey(authority string) string {
	if r.tc.ServerName != "" {
		return r.tc.ServerName
	}
	if h, _, err := net.SplitHostPort(authority); err == nil {
		return h
	}
	return authority
}

// ClientHandshake implements credentials.TransportCredentials.
func (r *resumeCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	key := r.cacheKey(authority)
	if !r.nt.has(key) {
		return r.TransportCredentials.ClientHandshake(ctx, authority, raw)
	}
	conn, info, err := r.classical.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	if ti, ok := info.(credentials.TLSInfo); ok && ti.State.DidResume {
		r.nt.t.classical.Add(1)
		return conn, info, nil
	}
	// The ticket was refused: a full handshake with X25519 alone. Nothing
	// was sent over it and its ticket is not read (that happens on the
	// first read after the handshake): dropped, and dialled again.
	conn.Close()
	r.nt.Put(key, nil)
	r.nt.t.redialled.Add(1)
	var d net.Dialer
	raw2, err := d.DialContext(ctx, raw.RemoteAddr().Network(), raw.RemoteAddr().String())
	if err != nil {
		return nil, nil, fmt.Errorf("dial again after a refused ticket: %w", err)
	}
	conn, info, err = r.TransportCredentials.ClientHandshake(ctx, authority, raw2)
	if err != nil {
		raw2.Close()
		return nil, nil, err
	}
	return conn, info, nil
}

// Clone implements credentials.TransportCredentials.
func (r *resumeCreds) Clone() credentials.TransportCredentials {
	return &resumeCreds{
		TransportCredentials: r.TransportCredentials.Clone(),
		classical:            r.classical.Clone(),
		tc:                   r.tc,
		nt:                   r.nt,
	}
}
