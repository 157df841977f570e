// Command encrypt is the encrypt half of an SR-aware encryption pair (see
// examples/services/crypt for the wire format, keys and replay window).
package main

import (
	"context"
	"io"

	"github.com/segchain/segchain/examples/services/crypt"
	"github.com/segchain/segchain/pkg/srv6svc/svcflags"
)

func main() {
	svcflags.Main("encrypt", func(ctx context.Context, args []string, out io.Writer) error { return crypt.Run(ctx, args, out, true) })
}
