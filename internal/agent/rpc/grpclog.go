package rpc

import (
	"io"
	"os"

	"google.golang.org/grpc/grpclog"
)

// QuietLog makes grpc-go's logger the one it installs by default (errors
// to stderr, warnings and information discarded) but with verbosity
// below 0, unless GRPC_GO_LOG_SEVERITY_LEVEL or GRPC_GO_LOG_VERBOSITY_LEVEL
// asks for another (then grpc-go's own stays). The default answers true
// to V(0), so grpc-go formats, for every connection, lines it then
// discards: the resolver's state as indented JSON, above all (1.6 % of a
// no-op apply's controller CPU at 1,000 agents: docs/scale.md, "Session
// 17"). Nothing that was printed before is lost. Call it first in main,
// before any gRPC use (grpclog.SetLoggerV2 is not synchronised).
func QuietLog() {
	if os.Getenv("GRPC_GO_LOG_SEVERITY_LEVEL") != "" || os.Getenv("GRPC_GO_LOG_VERBOSITY_LEVEL") != "" {
		return
	}
	grpclog.SetLoggerV2(grpclog.NewLoggerV2WithVerbosity(io.Discard, io.Discard, os.Stderr, -1))
}
