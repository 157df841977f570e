package usvcperf

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/examples/services/crypt"
	"github.com/segchain/segchain/internal/ids"
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
//	userspace-ids    the IDS engine (internal/ids) in IPS mode with
//	                 IDSRules synthetic content rules, batched as
//	                 userspace-batch: the cost of inspection on top
//	userspace-encrypt the encrypt example's sealer (AES-256-GCM over the
//	                 inner packet, examples/services/crypt), batched as
//	                 userspace-batch: the cost of sealing on top
//	*-stack          userspace-sync, userspace-batch, End.ASM with
//	                 Config.StackForward: the sent frame routed by the
//	                 IPv6 stack (the path before issue 32), not forwarded
//	                 by FIB from the loop side's TCX
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
		perf.NewRecipe("userspace-ids", fmt.Sprintf("SR-aware IPS (internal/ids, %d synthetic content rules) as a batched userspace service", IDSRules), r.setup(idsMode)),
		perf.NewRecipe("userspace-encrypt", "the encrypt example (AES-256-GCM over the inner packet) as a batched userspace service", r.setup(encMode)),
		perf.NewRecipe("userspace-sync-stack", "userspace-sync with the sent frame routed by the IPv6 stack (Config.StackForward: the path before issue 32)", r.setup(sync_|stackFwd)),
		perf.NewRecipe("userspace-batch-stack", "userspace-batch with the sent frame routed by the IPv6 stack (Config.StackForward: the path before issue 32)", r.setup(batch|stackFwd)),
		perf.NewRecipe("End.ASM-stack", "End.ASM with the sent frame routed by the IPv6 stack (Config.StackForward: the path before issue 32)", r.setup(asm|stackFwd)),
	}
}

// IDSRules is the size of userspace-ids' rule set (the issue's "IDS with
// 1,000 content rules").
const IDSRules = 1000

type mode int

const (
	sync_ mode = iota
	batch
	asm
	idsMode
	encMode

	// stackFwd (or'ed into a mode): Config.StackForward, the frames the
	// service sent routed by the stack, not forwarded by FIB from TCX.
	stackFwd mode = 0x100
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
		Interfaces: []string{env.In}, Queues: 1, Realtime: true, WorkerStart: func(int) { tids <- unix.Gettid() },
		StackForward: m&stackFwd != 0}
	m &^= stackFwd
	var handle func([]*srv6svc.Packet, []srv6svc.Verdict)
	switch m {
	case idsMode:
		var err error
		if handle, err = ipsBatch(IDSRules); err != nil {
			return err
		}
	case encMode:
		var err error
		if handle, err = sealBatch(); err != nil {
			return err
		}
	}
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
		case idsMode, encMode:
			done <- svc.ServeBatch(ctx, handle)
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

// ipsBatch is a batch handler inspecting every packet with an IPS engine
// of n synthetic rules (one worker: one scratch).
func ipsBatch(n int) (func([]*srv6svc.Packet, []srv6svc.Verdict), error) {
	rules, err := ids.Parse(strings.NewReader(ids.SyntheticRules(n)), "synthetic", nil)
	if err != nil {
		return nil, err
	}
	e, err := ids.New(rules, ids.Options{Mode: ids.ModeIPS})
	if err != nil {
		return nil, err
	}
	var s ids.ServiceScratch
	return func(ps []*srv6svc.Packet, vs []srv6svc.Verdict) {
		for i, p := range ps {
			vs[i] = ids.ServiceVerdict(e.Inspect(s.FromService(p)))
		}
	}, nil
}

// sealBatch is a batch handler sealing every packet with a fresh random
// AES-256 key (key id 1).
func sealBatch() (func([]*srv6svc.Packet, []srv6svc.Verdict), error) {
	dir, err := os.MkdirTemp("", "usvcperf-keys")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir) // read once
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "1.key"), []byte(hex.EncodeToString(key)), 0o600); err != nil {
		return nil, err
	}
	ring, err := crypt.LoadKeys(dir)
	if err != nil {
		return nil, err
	}
	s := crypt.NewSealer(ring)
	return func(ps []*srv6svc.Packet, vs []srv6svc.Verdict) {
		for i, p := range ps {
			vs[i] = s.Handle(p)
		}
	}, nil
}
