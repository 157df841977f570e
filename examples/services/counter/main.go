// Command counter is an SR-aware accounting service: it binds SIDs with
// pkg/srv6svc, counts every packet and byte per inner 5-tuple and per SID,
// forwards the packet (End), and exports the counts as Prometheus metrics.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/svcflags"
)

func main() { svcflags.Main("counter", run) }

// run binds, serves and exports until ctx ends. It prints "metrics on
// ADDR" once it serves.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("counter", flag.ContinueOnError)
	var f svcflags.Flags
	f.Register(fs, "counter")
	metrics := fs.String("metrics", "127.0.0.1:9470", "address of the Prometheus /metrics endpoint")
	maxFlows := fs.Int("max-flows", 100000, "flows tracked; packets of further flows are counted as overflow")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: counter --sid SID --dev DEV [flags]\n\nCounts packets and bytes per inner 5-tuple of the SIDs' traffic, forwards it (End), exports Prometheus metrics.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	acc := newAccounting(*maxFlows)
	reg := prometheus.NewRegistry()
	reg.MustRegister(acc)
	svc, err := srv6svc.Listen(cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	reg.MustRegister(serviceCollector{svc})
	ln, err := net.Listen("tcp", *metrics)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Fprintf(out, "counter: %d queue(s), %s; metrics on %s\n", svc.Queues(), svc.Mode(), ln.Addr())
	if f.Batch {
		err = svc.ServeBatch(ctx, func(ps []*srv6svc.Packet, _ []srv6svc.Verdict) {
			for _, p := range ps {
				acc.count(p)
			}
		})
	} else {
		err = svc.Serve(ctx, func(p *srv6svc.Packet) srv6svc.Verdict {
			acc.count(p)
			return srv6svc.Forward
		})
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
