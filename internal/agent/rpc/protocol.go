package rpc

// What both ends of the agent protocol must agree on.

// Protocol is the wire protocol's version (VersionReply.protocol): a
// controller talks only to agents of the same protocol.
const Protocol = 1

// MaxMessage bounds every message an agent receives (and so every JSON
// payload in it): larger ones are refused by gRPC before any handler runs.
const MaxMessage = 16 << 20

// Window is both ends' HTTP/2 flow-control window, per stream and per
// connection. Fixed, it turns grpc-go's bandwidth estimator off: that
// one pings its peer on the first data a connection receives (a frame
// each way, each a write and a wake-up on both sides), once per agent
// per command, to learn a window a message of MaxMessage does not need
// on a controller's network (4 MiB at 1 ms is 4 GB/s).
const Window = 4 << 20

// ReadBuffer is both ends' read buffer per connection. The controller
// dials every agent on every command, and grpc-go's default buffers (32
// KiB to read and 32 KiB to write, per connection and side) were
// allocated and zeroed for the few hundred bytes a no-op's call carries;
// a frame larger than the buffer is read past it, so large states do not
// pay. The write buffer is shared (grpc's SharedWriteBuffer: taken from
// a pool for a write, handed back after its flush).
const ReadBuffer = 4 << 10
