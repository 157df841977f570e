package client

import "google.golang.org/grpc"

// Conn is the agent's gRPC connection (mutual TLS, the protocol's
// message limits), for the other services an agent serves on it (the
// OAM service of segchain trace, internal/oam/oamsvc).
func (c *Client) Conn() grpc.ClientConnInterface { return c.conn }
