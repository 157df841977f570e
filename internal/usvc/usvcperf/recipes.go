package usvcperf

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// Recipes are the userspace services' recipes:
//
//	userspace-sync   a no-op service (Forward) bound to recipe k's SID, one
//	                 packet per handler call, one worker (AF_XDP socket)
//	                 whose thread is pinned to the SUT CPU and counted as SUT
//	userspace-batch  the same in batched mode (64 packets per call)
//	End.ASM          a no-op SR-unaware function behind End.ASM
//
// Test packet: SRv6 (SRH: the service's SID, then a far SID; SL 1)
// carrying an IPv6 UDP packet, as native End's.
//
// The worker runs SCHED_FIFO (srv6svc.Config.Realtime), as the docs
// recommend when a worker shares its CPU with the NAPI thread that feeds
// it: the SUT has one core here. As a normal task it lost the CPU to the
// NAPI thread, which then steered and copied five frames into the full
// socket ring for every frame the worker served (see docs/userspace.md,
// "Performance").
func Recipes() []perf.Recipe {
	r := &runner{svcs: map[key]bool{}}
	return []perf.Recipe{
		perf.NewRecipe("userspace-sync", "no-op userspace SR-aware service (pkg/srv6svc, AF_XDP), synchronous: End in userspace", r.setup(sync_)),
		perf.NewRecipe("userspace-batch", "no-op userspace SR-aware service (pkg/srv6svc, AF_XDP), batched (64): End in userspace", r.setup(batch)),
		perf.NewRecipe("End.ASM", "shared-memory SR proxy (pkg/srv6svc) with a no-op SR-unaware function", r.setup(asm)),
	}
}

type mode int

const (
	sync_ mode = iota
	batch
	asm
)

type key struct {
	env *perf.Env
	k   int
}

type runner struct {
	mu   sync.Mutex
	svcs map[key]bool
}

func (r *runner) setup(m mode) func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	return func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
		if env.Do == nil || env.AddSUTTask == nil || env.Cleanup == nil {
			return nil, fmt.Errorf("the userspace service needs a local SUT: %w", perf.ErrNotSupported)
		}
		sid := perf.Addr("sid", k, 1)
		if err := r.start(env, k, sid, m); err != nil {
			return nil, err
		}
		return perf.EndFrame(env, k, p, 1, []netip.Addr{sid, perf.Addr("far", k, 1)}, false)
	}
}

// start binds recipe k's SID once per testbed; the testbed's cleanup
// releases it.
func (r *runner) start(env *perf.Env, k int, sid netip.Addr, m mode) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	kk := key{env, k}
	if r.svcs[kk] {
		return nil
	}
	tids := make(chan int, 1)
	cfg := srv6svc.Config{Name: fmt.Sprintf("perf-%d", k), SIDs: []netip.Prefix{netip.PrefixFrom(sid, 128)},
		Interfaces: []string{env.In}, Queues: 1, Realtime: true, WorkerStart: func(int) { tids <- unix.Gettid() }}
	var svc *srv6svc.Service
	err := env.Do(func() error {
		var err error
		svc, err = srv6svc.Listen(cfg)
		return err
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		switch m {
		case sync_:
			done <- svc.Serve(ctx, func(*srv6svc.Packet) srv6svc.Verdict { return srv6svc.Forward })
		case batch:
			done <- svc.ServeBatch(ctx, func([]*srv6svc.Packet, []srv6svc.Verdict) {})
		case asm:
			done <- svc.ServeASM(ctx, func([]byte) srv6svc.InnerVerdict { return srv6svc.Pass })
		}
	}()
	stop := func() error {
		cancel()
		err := <-done
		var rerr error
		_ = env.Do(func() error { rerr = svc.Release(); return nil })
		if err != nil {
			return err
		}
		return rerr
	}
	if err := env.AddSUTTask(<-tids); err != nil {
		stop()
		return err
	}
	r.svcs[kk] = true
	env.Cleanup(func() error {
		r.mu.Lock()
		delete(r.svcs, kk)
		r.mu.Unlock()
		return stop()
	})
	return nil
}
