package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
)

// CheckInsecureListen refuses a plaintext listen address that is not a
// loopback address: without TLS anyone who reaches the port could
// program the node.
func CheckInsecureListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("--insecure listens in plaintext: only on a loopback address (127.0.0.1:PORT, [::1]:PORT), not %q", addr)
}

// NewGRPCServer is the gRPC server of agent s: mutual TLS with tlsConf
// (pki.ServerTLS), or plaintext when tlsConf is nil (the caller checked
// CheckInsecureListen). Refused handshakes (wrong CA, expired
// certificate, a client that is not a controller, plaintext) are logged.
// It registers s and tells it when a connection closes (leases).
func NewGRPCServer(s *Server, tlsConf *tls.Config, log *slog.Logger) *grpc.Server {
	opts := append(ServerOptions(), grpc.StatsHandler(connWatch{s}))
	if tlsConf != nil {
		opts = append(opts, grpc.Creds(loggedCreds{credentials.NewTLS(tlsConf), log}))
	} else {
		opts = append(opts, grpc.Creds(insecure.NewCredentials()))
	}
	g := grpc.NewServer(opts...)
	s.Register(g)
	return g
}

// connWatch reports closed connections to the server.
type connWatch struct{ s *Server }

type peerKey struct{}

func (w connWatch) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, peerKey{}, info.RemoteAddr.String())
}

func (w connWatch) HandleConn(ctx context.Context, st stats.ConnStats) {
	if _, ok := st.(*stats.ConnEnd); ok {
		if p, ok := ctx.Value(peerKey{}).(string); ok {
			w.s.connClosed(p)
		}
	}
}

func (connWatch) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connWatch) HandleRPC(context.Context, stats.RPCStats)                       {}

// loggedCreds logs the handshakes the TLS credentials refuse.
type loggedCreds struct {
	credentials.TransportCredentials
	log *slog.Logger
}

func (c loggedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, ai, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil && c.log != nil {
		c.log.Warn("connection refused", "peer", conn.RemoteAddr().String(), "err", err.Error())
	}
	return nc, ai, err
}

func (c loggedCreds) Clone() credentials.TransportCredentials {
	return loggedCreds{c.TransportCredentials.Clone(), c.log}
}

// Serve runs g on lis until ctx ends, then stops it gracefully.
func Serve(ctx context.Context, g *grpc.Server, lis net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	select {
	case <-ctx.Done():
		g.GracefulStop()
		return nil
	case err := <-errc:
		return err
	}
}
