package perf

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// xdpGenerator is the XDP live-frames generator: BPF_PROG_TEST_RUN with
// BPF_F_TEST_XDP_LIVE_FRAMES runs perf_gen over a small pool of pages, which
// rewrites each frame from the active template and redirects it to the
// tester's tx port. It runs in the tester namespace on one pinned CPU.
type xdpGenerator struct {
	ns     string
	cpu    int
	nice   int
	objs   perfGenObjects
	ctl    perfGenPerfGenCtl
	frames [perfTmplSlots][]byte
	// pristine: the sink never modifies a frame (see SetPristine);
	// startSlot is the template the running generator's pages were
	// initialised with; dirty: since Start, a frame may have been written
	// with another template (a switch, a reload), so the run rewrites.
	pristine  bool
	startSlot int
	dirty     bool
	mu        sync.Mutex
	running   bool
	stop      chan struct{}
	done      chan error
}

const (
	perfTmplSlots = 32   // PERF_TMPL_SLOTS
	perfTmplMax   = 1536 // PERF_TMPL_MAX
	// genChunk frames per PROG_TEST_RUN call (≈ 0.1–1 s): between calls the
	// generator checks for Stop.
	genChunk = 1 << 20
	// genBatch frames per batch of the live-frames loop (the kernel's
	// maximum, TEST_XDP_MAX_BATCH): fewer bh-disable/flush rounds per
	// frame. The veth ring is fed in devmap bulks of 16 whatever the batch.
	genBatch = 256
	// stampBatch is the batch while frames are stamped (latency, paced):
	// redirected frames leave at the end of their batch, so a stamped
	// frame waits for the rest of it — ≈ 10 µs for 256 frames of the
	// rate limiter's idle drops. A small batch keeps that short.
	stampBatch = 8
)

func newXDPGenerator(testerNS string, txIfindex, cpu, nice int) (*xdpGenerator, error) {
	g := &xdpGenerator{ns: testerNS, cpu: cpu, nice: nice}
	if err := loadPerfGenObjects(&g.objs, nil); err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	g.ctl.Ifindex = uint32(txIfindex)
	if err := g.writeCtl(); err != nil {
		g.objs.Close()
		return nil, err
	}
	return g, nil
}

// writeCtl publishes the control block. The rewrite is skipped only
// while frames come back untouched and the active template is the one the
// pages were initialised with.
func (g *xdpGenerator) writeCtl() error {
	g.ctl.Flags &^= uint32(perfGenPerfGenFlagsPERF_GEN_F_PRISTINE)
	if g.running && int(g.ctl.Active) != g.startSlot {
		g.dirty = true // sticky until the next Start
	}
	if g.pristine && g.running && !g.dirty {
		g.ctl.Flags |= uint32(perfGenPerfGenFlagsPERF_GEN_F_PRISTINE)
	}
	c := g.ctl
	c.EpochNs, c.Credit = 0, 0 // the program restarts its token bucket
	if err := g.objs.PerfCtl.Update(uint32(0), &c, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write generator control: %w", err)
	}
	return nil
}

func (g *xdpGenerator) MaxSlots() int { return perfTmplSlots }

func (g *xdpGenerator) Load(slot int, frame []byte) error {
	if slot < 0 || slot >= perfTmplSlots {
		return fmt.Errorf("template slot %d out of range 0..%d", slot, perfTmplSlots-1)
	}
	if len(frame) < 14 || len(frame) > perfTmplMax {
		return fmt.Errorf("template of %d bytes: want 14..%d", len(frame), perfTmplMax)
	}
	var t perfGenPerfTmpl
	t.Len = uint32(len(frame))
	copy(t.Data[:], frame)
	if off, ok := stampSpot(frame); ok {
		t.StampOff = uint16(off)
		t.StampCsum = stampCsum(frame, off, slot)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running && slot == g.startSlot && !g.dirty {
		// The pages hold the old template: rewrite from now on.
		g.dirty = true
		if err := g.writeCtl(); err != nil {
			return err
		}
	}
	if err := g.objs.PerfTmpls.Update(uint32(slot), &t, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("load template %d: %w", slot, err)
	}
	g.frames[slot] = append([]byte(nil), frame...)
	return nil
}

// SetPristine declares whether the sink leaves frames untouched (a native
// XDP_DROP on the peer). While it does, and while the active template is
// the one the run started with, the generator skips its per-frame
// rewrite: the pages were initialised with that template and nothing
// writes to them. Any stack on the path (a SUT) modifies frames in place,
// so SetPristine(false) is the default and the only safe setting there.
// It takes effect at the next Start.
func (g *xdpGenerator) SetPristine(on bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running && on {
		return errors.New("set pristine while the generator runs")
	}
	g.pristine = on
	return g.writeCtl()
}

// SetStamp turns the latency stamp of every frame on or off (at once,
// also while the generator runs). Only templates with room for a stamp
// (stampSpot) are stamped.
func (g *xdpGenerator) SetStamp(on bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := uint32(perfGenPerfGenFlagsPERF_GEN_F_STAMP)
	if on {
		g.ctl.Flags |= f
	} else {
		g.ctl.Flags &^= f
	}
	return g.writeCtl()
}

// Stamped reports whether the template in slot carries a latency stamp.
func (g *xdpGenerator) Stamped(slot int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if slot < 0 || slot >= perfTmplSlots || g.frames[slot] == nil {
		return false
	}
	_, ok := stampSpot(g.frames[slot])
	return ok
}

func (g *xdpGenerator) Select(slot int) error {
	if slot < 0 || slot >= perfTmplSlots {
		return fmt.Errorf("template slot %d out of range", slot)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ctl.Active = uint32(slot)
	return g.writeCtl()
}

func (g *xdpGenerator) SetRate(pps uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ctl.RatePps = pps
	return g.writeCtl()
}

// Start launches the sending goroutine. Its OS thread enters the tester
// namespace (live frames are injected there, so the redirect ifindex
// resolves there) and is pinned to the generator CPU.
func (g *xdpGenerator) Start() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running {
		return errors.New("generator already running")
	}
	// The initial frame is the active template: it sizes the pages, and
	// it is what a pristine run sends without rewriting.
	data := append([]byte(nil), g.frames[g.ctl.Active]...)
	if len(data) == 0 {
		data = make([]byte, 64)
	}
	g.startSlot, g.dirty = int(g.ctl.Active), false
	g.running = true
	g.ctl.Stop = 0
	if err := g.writeCtl(); err != nil {
		g.running = false
		return err
	}
	g.stop, g.done = make(chan struct{}), make(chan error, 1)
	stop, done, prog := g.stop, g.done, g.objs.PerfGen
	batch := uint32(genBatch)
	if g.ctl.Flags&uint32(perfGenPerfGenFlagsPERF_GEN_F_STAMP) != 0 {
		batch = stampBatch
	}
	go func() {
		done <- nsutil.Do(g.ns, func() error {
			var old, set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &old); err != nil {
				return fmt.Errorf("get affinity: %w", err)
			}
			set.Set(g.cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return fmt.Errorf("pin generator to cpu %d: %w", g.cpu, err)
			}
			defer unix.SchedSetaffinity(0, &old)
			if g.nice != 0 {
				// who = 0 is the calling thread on Linux.
				if err := unix.Setpriority(unix.PRIO_PROCESS, 0, g.nice); err != nil {
					return fmt.Errorf("renice generator: %w", err)
				}
				defer unix.Setpriority(unix.PRIO_PROCESS, 0, 0)
			}
			runtime.LockOSThread() // paired: nsutil.Do unlocks once
			defer runtime.UnlockOSThread()
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				_, err := prog.Run(&ebpf.RunOptions{
					Data:      data,
					Repeat:    genChunk,
					Flags:     unix.BPF_F_TEST_XDP_LIVE_FRAMES,
					BatchSize: batch,
				})
				if err != nil {
					return fmt.Errorf("xdp live frames: %w", err)
				}
			}
		})
	}()
	return nil
}

func (g *xdpGenerator) Stop() error {
	g.mu.Lock()
	if !g.running {
		g.mu.Unlock()
		return nil
	}
	g.running = false
	g.ctl.Stop = 1
	werr := g.writeCtl() // the rest of the chunk is dropped at once
	close(g.stop)
	done := g.done
	g.mu.Unlock()
	err := <-done
	return errors.Join(werr, err)
}

// sent sums frames sent over the loaded slots and all CPUs (only loaded
// slots can have sent: fewer lookups keep a sample short).
func (g *xdpGenerator) sent() (uint64, error) {
	var n uint64
	g.mu.Lock()
	loaded := make([]uint32, 0, perfTmplSlots)
	for slot, f := range g.frames {
		if f != nil {
			loaded = append(loaded, uint32(slot))
		}
	}
	g.mu.Unlock()
	for _, slot := range loaded {
		var per []perfGenPerfGenCount
		if err := g.objs.PerfSent.Lookup(slot, &per); err != nil {
			return 0, fmt.Errorf("read generator counters: %w", err)
		}
		for _, c := range per {
			n += c.Frames
		}
	}
	return n, nil
}

// verdicts returns the generator's per-verdict counters (drop reasons;
// "sent" from the per-slot counters, the program does not count it twice).
func (g *xdpGenerator) verdicts() (map[string]uint64, error) {
	out := map[string]uint64{}
	for v := perfGenPerfGenVerdict(0); v < perfGenPerfGenVerdictPERF_GEN_VERDICT_MAX; v++ {
		var per []uint64
		if err := g.objs.PerfVerdicts.Lookup(uint32(v), &per); err != nil {
			return nil, fmt.Errorf("read generator verdicts: %w", err)
		}
		var n uint64
		for _, c := range per {
			n += c
		}
		out[v.String()] = n
	}
	sent, err := g.sent()
	if err != nil {
		return nil, err
	}
	out[perfGenPerfGenVerdictPERF_GEN_SENT.String()] = sent
	return out, nil
}

func (g *xdpGenerator) Close() error {
	err := g.Stop()
	g.objs.Close()
	return err
}

// String names a generator verdict (the drop reasons of perf_gen).
func (v perfGenPerfGenVerdict) String() string {
	switch v {
	case perfGenPerfGenVerdictPERF_GEN_SENT:
		return "sent"
	case perfGenPerfGenVerdictPERF_GEN_IDLE_STOPPED:
		return "idle-stopped"
	case perfGenPerfGenVerdictPERF_GEN_IDLE_RATE:
		return "idle-rate"
	case perfGenPerfGenVerdictPERF_GEN_DROP_NO_CTL:
		return "drop-no-ctl"
	case perfGenPerfGenVerdictPERF_GEN_DROP_BAD_TMPL:
		return "drop-bad-template"
	case perfGenPerfGenVerdictPERF_GEN_DROP_RESIZE:
		return "drop-resize"
	case perfGenPerfGenVerdictPERF_GEN_DROP_STORE:
		return "drop-store"
	}
	return fmt.Sprintf("verdict-%d", uint32(v))
}
