package health

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/pool/datapath"
)

// Targets are the checks of a headend's pools (datapath.Specs order: the
// pool id is the index). netnsOf names the namespace of another node (a
// carrier check looks at the SF's interface on the instance's node); nil,
// or false, when that node is not on this host: the instance is then not
// checked (skipped lists why).
func Targets(netns string, specs []pool.Spec, netnsOf func(node string) (string, bool)) (out []Target, skipped []string, err error) {
	for id, sp := range specs {
		iv, err := time.ParseDuration(sp.Health.Interval)
		if err != nil {
			return nil, nil, fmt.Errorf("pool %s: interval: %w", sp.Pool.Name, err)
		}
		var to time.Duration
		if sp.Health.Timeout != "" {
			if to, err = time.ParseDuration(sp.Health.Timeout); err != nil {
				return nil, nil, fmt.Errorf("pool %s: timeout: %w", sp.Pool.Name, err)
			}
		}
		spec := Spec{Kind: sp.Health.Kind, Interval: iv, Timeout: to, Rise: sp.Health.Rise, Fall: sp.Health.Fall}
		for i, in := range sp.Pool.Instances {
			if i >= len(sp.Probes) {
				break
			}
			pr := sp.Probes[i]
			t := Target{Pool: sp.Pool.Name, PoolID: id, Instance: i, Name: in.Name, Spec: spec, Netns: netns,
				Iface: pr.Iface, Addr: pr.Addr, Port: sp.Health.Port, Segs: pr.Segs, Src: pr.Src}
			if spec.Kind == Carrier {
				ns, ok := "", false
				if netnsOf != nil {
					ns, ok = netnsOf(pr.Node)
				}
				if !ok {
					skipped = append(skipped, fmt.Sprintf("%s/%s: carrier of %s on node %s, which is not on this host: not checked (use health kind srv6)", sp.Pool.Name, in.Name, pr.Iface, pr.Node))
					continue
				}
				t.Netns = ns
			}
			out = append(out, t)
		}
	}
	return out, skipped, nil
}

// Report is what a headend's checker last said: status reads it.
type Report struct {
	Updated   time.Time        `json:"updated"`
	Instances []InstanceStatus `json:"instances"`
	Skipped   []string         `json:"skipped,omitempty"`
}

// ReadReport reads netns's report (nil when there is none).
func ReadReport(netns string) (*Report, error) {
	var r Report
	ok, err := datapath.ReadHealth(netns, &r)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

// RunNode keeps the checks of netns's pools running until ctx ends: it
// follows the record apply writes (datapath.Specs), restarting the checks
// when the pools change, writes liveness into the selector's pinned map
// and the report status reads (on every transition and every second).
func RunNode(ctx context.Context, netns string, netnsOf func(string) (string, bool), log *slog.Logger, onTransition func(Transition)) {
	if log == nil {
		log = slog.Default()
	}
	var (
		last    string
		cancel  context.CancelFunc = func() {}
		wait                       = func() {}
		checker *Checker
		skipped []string
		he      *datapath.Headend
	)
	stop := func() {
		cancel()
		wait()
		if he != nil {
			he.Close()
			he = nil
		}
		checker = nil
	}
	defer stop()
	// report is called by this loop and by the checks' goroutines (on a
	// transition): the snapshot and its write are one step, so a snapshot
	// taken before a transition is never written after the transition's.
	var reportMu sync.Mutex
	report := func(c *Checker, skipped []string) {
		reportMu.Lock()
		defer reportMu.Unlock()
		if c == nil {
			return
		}
		r := Report{Updated: time.Now(), Instances: c.Status(), Skipped: skipped}
		if err := datapath.WriteHealth(netns, r); err != nil {
			log.Error("write pool health report", "netns", netns, "error", err)
		}
	}
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		specs, err := datapath.Specs(netns)
		if err != nil {
			log.Error("read pools", "netns", netns, "error", err)
		}
		b, _ := json.Marshal(specs)
		if err == nil && string(b) != last {
			stop()
			last = string(b)
			if len(specs) > 0 {
				if err := start(ctx, netns, specs, netnsOf, log, onTransition, report, &he, &checker, &skipped, &cancel, &wait); err != nil {
					log.Error("start pool health checks", "netns", netns, "error", err)
					last = "" // try again
				}
			}
		}
		report(checker, skipped)
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

func start(ctx context.Context, netns string, specs []pool.Spec, netnsOf func(string) (string, bool), log *slog.Logger,
	onTransition func(Transition), report func(*Checker, []string), he **datapath.Headend, checker **Checker, skipped *[]string,
	cancel *context.CancelFunc, wait *func()) error {
	targets, sk, err := Targets(netns, specs, netnsOf)
	if err != nil {
		return err
	}
	for _, s := range sk {
		log.Warn("pool instance not checked", "netns", netns, "why", s)
	}
	h, err := datapath.Reopen(netns)
	if err != nil {
		return err
	}
	c := New(targets, h, log)
	c.Publish = func() { report(c, sk) }
	c.OnTransition = onTransition
	cctx, cf := context.WithCancel(ctx)
	w, err := c.Start(cctx)
	if err != nil {
		cf()
		h.Close()
		return err
	}
	*he, *checker, *skipped, *cancel, *wait = h, c, sk, cf, w
	log.Info("pool health checks running", "netns", netns, "pools", len(specs), "checks", len(targets))
	return nil
}
