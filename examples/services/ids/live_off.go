//go:build !srv6svc

package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/segchain/segchain/internal/ids"
)

// Without pkg/srv6svc (the userspace-services library, built with the
// srv6svc tag until it is on main) there is no live mode: no -sid/-dev
// flags. live.go is the real one; at the merge, delete this file and
// live.go's build constraint.
type liveFlags struct{}

func addLiveFlags(*flag.FlagSet) *liveFlags { return &liveFlags{} }

func (*liveFlags) enabled() bool { return false }

func (*liveFlags) run(context.Context, *ids.Engine, string, func() (*ids.Engine, error), io.Writer) error {
	return errors.New("live mode needs pkg/srv6svc (build with -tags srv6svc)")
}
