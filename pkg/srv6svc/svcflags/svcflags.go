// Package svcflags holds the command-line flags an srv6svc service binary
// shares with every other (--sid, --usid, --dev, --netns, --name, --on-failure,
// --queues, --batch, --batch-size, --realtime, --stack-forward) and turns them into an
// srv6svc.Config; Main runs the service until SIGINT/SIGTERM.
//
//	fs := flag.NewFlagSet("mysvc", flag.ContinueOnError)
//	var f svcflags.Flags
//	f.Register(fs, "mysvc")
//	if err := fs.Parse(args); err != nil { ... }
//	cfg, err := f.Config() // every flag error at once
//	svc, err := srv6svc.Listen(cfg)
package svcflags

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/segchain/segchain/pkg/srv6svc"
)

// Flags are the binding flags.
type Flags struct {
	Name, Netns, OnFailure string
	USID                   string
	SIDs, Devs             list
	Queues, BatchSize      int
	Batch, Realtime        bool
	StackForward           bool
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, strings.Split(s, ",")...); return nil }

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet, name string) {
	fs.StringVar(&f.Name, "name", name, "binding name shown by `segchain sid show`")
	fs.StringVar(&f.Netns, "netns", "", "network namespace of the node (a name under /run/netns); default: this process's")
	fs.StringVar(&f.OnFailure, "on-failure", "drop", "what happens to the SIDs' packets while this process is not running: drop or bypass")
	fs.Var(&f.SIDs, "sid", "SID or SID/LEN prefix (low bits are ARGS) to bind; repeatable or comma-separated")
	fs.StringVar(&f.USID, "usid", "", "the SIDs are uSIDs (RFC 9800 NEXT-C-SID) of this format: f3216, f4816 (or LB/NF in bits, e.g. 32/16, 56/16); bind each as block:uSID::/(LB+NF), the prefix `segchain plan` shows; forward shifts the container (docs/usid.md)")
	fs.Var(&f.Devs, "dev", "interface where the SIDs' traffic arrives; repeatable or comma-separated")
	fs.IntVar(&f.Queues, "queues", 0, "receive queues per interface to serve (0: all)")
	fs.BoolVar(&f.Batch, "batch", false, "asynchronous batched mode (default: synchronous, one packet at a time)")
	fs.IntVar(&f.BatchSize, "batch-size", 64, "packets per batch in batched mode")
	fs.BoolVar(&f.StackForward, "stack-forward", false, "send processed packets through the node's IPv6 stack (its netfilter FORWARD/POSTROUTING rules see them) instead of forwarding them by FIB from TCX (the start line says fwd=stack or fwd=fib)")
	fs.BoolVar(&f.Realtime, "realtime", false, "run the workers SCHED_FIFO, ahead of the kernel's NAPI thread on a shared CPU (needs CAP_SYS_NICE; the start line says sched=fifo or sched=normal)")
}

// Config checks the flags and returns the binding's configuration, with
// every error (errors.Is(err, srv6svc.ErrConfig) holds).
func (f *Flags) Config() (srv6svc.Config, error) {
	var errs []string
	cfg := srv6svc.Config{Name: f.Name, Netns: f.Netns, Interfaces: f.Devs, Queues: f.Queues, BatchSize: f.BatchSize, Realtime: f.Realtime, StackForward: f.StackForward}
	for _, s := range f.SIDs {
		if !strings.Contains(s, "/") {
			s += "/128"
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			errs = append(errs, fmt.Sprintf("--sid %s: %v", s, err))
			continue
		}
		cfg.SIDs = append(cfg.SIDs, p)
	}
	if f.USID != "" {
		c, err := srv6svc.ParseCSIDFormat(f.USID)
		if err != nil {
			errs = append(errs, "--usid: "+err.Error())
		}
		cfg.CSID = c
	}
	pol, err := srv6svc.ParseOnFailure(f.OnFailure)
	if err != nil {
		errs = append(errs, "--"+err.Error())
	}
	cfg.OnFailure = pol
	if len(f.SIDs) == 0 {
		errs = append(errs, "--sid: at least one SID is needed")
	}
	if len(f.Devs) == 0 {
		errs = append(errs, "--dev: at least one interface is needed")
	}
	if len(errs) > 0 {
		ce := &srv6svc.ConfigError{}
		for _, e := range errs {
			ce.Problems = append(ce.Problems, errors.New(e))
		}
		return cfg, ce
	}
	return cfg, nil
}

// Main runs a service's run function until SIGINT or SIGTERM and exits 1
// on error, printing it after the service's name.
func Main(name string, run func(ctx context.Context, args []string, out io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		stop()
		os.Exit(1)
	}
}
