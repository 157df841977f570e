package rpc

import (
	"io"
	"os"
	"testing"

	"google.golang.org/grpc/grpclog"
)

// QuietLog leaves grpc-go's logger alone when its environment asks for
// one, and otherwise answers false to V(0), so that grpc-go skips the
// lines it would format and discard.
func TestQuietLog(t *testing.T) {
	// grpc-go's default back afterwards (the same writers, verbosity 0).
	t.Cleanup(func() { grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr)) })
	t.Setenv("GRPC_GO_LOG_VERBOSITY_LEVEL", "")
	t.Setenv("GRPC_GO_LOG_SEVERITY_LEVEL", "info")
	QuietLog()
	if !grpclog.V(0) {
		t.Fatal("GRPC_GO_LOG_SEVERITY_LEVEL set: QuietLog replaced grpc-go's logger")
	}
	t.Setenv("GRPC_GO_LOG_SEVERITY_LEVEL", "")
	QuietLog()
	if grpclog.V(0) {
		t.Fatal("after QuietLog, V(0) is still true")
	}
}
