package rpc

// What both ends of the agent protocol must agree on.

// Protocol is the wire protocol's version (VersionReply.protocol): a
// controller talks only to agents of the same protocol.
const Protocol = 1

// MaxMessage bounds every message an agent receives (and so every JSON
// payload in it): larger ones are refused by gRPC before any handler runs.
const MaxMessage = 16 << 20
