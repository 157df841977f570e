package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// Conn is the agent's gRPC connection (mutual TLS, the protocol's
// message limits), for the other services an agent serves on it (the
// OAM service of segchain trace, internal/oam/oamsvc).
func (c *Client) Conn() grpc.ClientConnInterface { return c.conn }

// Connect sets the connection up (TCP, TLS, HTTP/2) before the first
// call needs it and waits until it is ready or has failed (or ctx is
// done): a command dials its agents while it plans (session.Open). It
// reports whether the connection is ready; one that failed is set up
// again by the first call, as without it.
func (c *Client) Connect(ctx context.Context) bool {
	c.conn.Connect()
	for {
		s := c.conn.GetState()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		}
		if !c.conn.WaitForStateChange(ctx, s) {
			return false
		}
	}
}

// Ready: the connection is set up (tests).
func (c *Client) Ready() bool { return c.conn.GetState() == connectivity.Ready }

// Redial replaces a connection that failed to set up (Connect) with a
// new one, not yet set up: the next call tries afresh and reports its own
// error, as a first call does, instead of the earlier attempt's. Not
// while a call may use the client.
func (c *Client) Redial() error {
	old := c.conn
	if err := c.dial(); err != nil {
		return err
	}
	return old.Close()
}
