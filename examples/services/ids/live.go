package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/segchain/segchain/internal/ids"
	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/svcflags"
)

// liveFlags are the binding flags every example service shares (-sid,
// -dev, -netns, -on-failure, -queues, -batch, -batch-size, -name).
type liveFlags struct{ f svcflags.Flags }

func addLiveFlags(fs *flag.FlagSet) *liveFlags {
	l := &liveFlags{}
	l.f.Register(fs, "ids")
	return l
}

func (l *liveFlags) enabled() bool { return len(l.f.SIDs) > 0 || len(l.f.Devs) > 0 }

// run binds the SIDs and inspects every packet until ctx ends: Drop when
// the engine says so, Forward (End) otherwise. On SIGHUP it reloads the
// rules with reload: a rule file with errors is refused (every error
// printed) and the running rules stay.
func (l *liveFlags) run(ctx context.Context, e *ids.Engine, rulesFile string, reload func() (*ids.Engine, error), stderr io.Writer) error {
	cfg, err := l.f.Config()
	if err != nil {
		return err
	}
	svc, err := srv6svc.Listen(cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	in := newLiveInspector(e)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			ne, err := reload()
			if err != nil {
				fmt.Fprintf(stderr, "ids: reload refused, the running %d rules stay:\n", len(in.engine().Rules()))
				reportRuleErrors(stderr, rulesFile, err)
				continue
			}
			in.swap(ne)
			fmt.Fprintf(stderr, "ids: reloaded %d rules\n", len(ne.Rules()))
		}
	}()
	fmt.Fprintf(stderr, "ids: %s mode, %d rules, %d queue(s), %s\n", e.Mode(), len(e.Rules()), svc.Queues(), svc.Mode())
	if l.f.Batch {
		err = svc.ServeBatch(ctx, func(ps []*srv6svc.Packet, vs []srv6svc.Verdict) {
			for i, p := range ps {
				vs[i] = in.verdict(p)
			}
		})
	} else {
		err = svc.Serve(ctx, in.verdict)
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	<-reloaded
	st := in.stats()
	fmt.Fprintf(stderr, "ids: %d packets inspected, %d dropped, %d alerts, %d undecodable\n", st.Inspected, st.Dropped, st.Alerts, st.Undecodable)
	return err
}

// liveInspector turns the library's packets into ids.Packets. Workers of
// several queues call it at once; the per-packet scratch (segment list,
// insert-mode buffer) comes from a pool, so steady state allocates nothing.
// The engine is swapped atomically on reload.
type liveInspector struct {
	e    atomic.Pointer[ids.Engine]
	pool sync.Pool

	mu   sync.Mutex
	base ids.Stats // counters of the engines replaced by reloads
}

func newLiveInspector(e *ids.Engine) *liveInspector {
	l := &liveInspector{}
	l.e.Store(e)
	l.pool.New = func() any { return &ids.ServiceScratch{} }
	return l
}

func (l *liveInspector) engine() *ids.Engine { return l.e.Load() }

// swap replaces the engine; the old one's counters are kept in the totals.
func (l *liveInspector) swap(e *ids.Engine) {
	old := l.e.Swap(e).Stats()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.base.Inspected += old.Inspected
	l.base.Alerts += old.Alerts
	l.base.Dropped += old.Dropped
	l.base.Passed += old.Passed
	l.base.Undecodable += old.Undecodable
	l.base.WriteErrors += old.WriteErrors
}

// stats sums the counters of every engine this inspector ran.
func (l *liveInspector) stats() ids.Stats {
	cur := l.engine().Stats()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur.Inspected += l.base.Inspected
	cur.Alerts += l.base.Alerts
	cur.Dropped += l.base.Dropped
	cur.Passed += l.base.Passed
	cur.Undecodable += l.base.Undecodable
	cur.WriteErrors += l.base.WriteErrors
	return cur
}

func (l *liveInspector) verdict(sp *srv6svc.Packet) srv6svc.Verdict {
	s := l.pool.Get().(*ids.ServiceScratch)
	v := l.engine().Inspect(s.FromService(sp))
	l.pool.Put(s)
	return ids.ServiceVerdict(v)
}
