package crypt

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/svcflags"
)

// Run is the encrypt (seal true) or decrypt command: bind, serve until
// ctx ends, reload the keys on SIGHUP, print the counters at the end. It
// prints one line once it serves.
func Run(ctx context.Context, args []string, out io.Writer, seal bool) error {
	name := map[bool]string{true: "encrypt", false: "decrypt"}[seal]
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var f svcflags.Flags
	f.Register(fs, name)
	keys := fs.String("keys", "", "directory of <id>.key files (32 bytes as 64 hex digits each); SIGHUP reloads it")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s --sid SID --dev DEV --keys DIR [flags]\n\n", name)
		if seal {
			fmt.Fprintf(fs.Output(), "Seals each inner packet with AES-256-GCM under the highest key id (wire format: go doc ./examples/services/crypt).\n\n")
		} else {
			fmt.Fprintf(fs.Output(), "Opens packets sealed by encrypt: unknown key, failed authentication, replay and too old are dropped and counted.\n\n")
		}
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := f.Config()
	if *keys == "" {
		err = errors.Join(err, errors.New("--keys: a key directory is needed"))
	}
	if err != nil {
		return err
	}
	ring, err := LoadKeys(*keys)
	if err != nil {
		return err
	}
	var h srv6svc.Handler
	var c *Counters
	if seal {
		s := NewSealer(ring)
		h, c = s.Handle, &s.C
	} else {
		o := NewOpener(ring)
		h, c = o.Handle, &o.C
	}
	svc, err := srv6svc.Listen(cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			if err := ring.Reload(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: reload: %v\n", name, err)
			}
		}
	}()
	fmt.Fprintf(out, "%s: %d queue(s), %s\n", name, svc.Queues(), svc.Mode())
	if f.Batch {
		err = svc.ServeBatch(ctx, func(ps []*srv6svc.Packet, vs []srv6svc.Verdict) {
			for i, p := range ps {
				vs[i] = h(p)
			}
		})
	} else {
		err = svc.Serve(ctx, h)
	}
	fmt.Fprintf(out, "%s: %s\n", name, c)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
