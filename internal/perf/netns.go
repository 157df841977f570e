package perf

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// NetnsOptions tunes the built-in testbed.
type NetnsOptions struct {
	// GenCPU runs the generator, SUTCPU the SUT's NAPI thread. They must
	// differ so that the SUT's work is isolated and measurable.
	GenCPU, SUTCPU int
	// SUTNice is the nice value of the SUT's NAPI thread (0 = leave it;
	// −20 makes it win its CPU against other work on a shared machine).
	SUTNice int
	// GenNice is the nice value of the generator's thread while it sends.
	GenNice int
	// Prefix starts the namespace names (default "spf"); a random suffix
	// makes them unique.
	Prefix string
	// ConfineProcess pins every thread of this process to GenCPU while the
	// testbed is up (restored by Down), so that the SUT CPU runs the SUT
	// only: the Go runtime's threads (the sampler's wakeups, the garbage
	// collector) otherwise preempt the SUT's NAPI thread a few hundred
	// times a second. Threads the SUT owns (Env.AddSUTTask) are pinned to
	// SUTCPU. A process-wide setting: for commands, not for libraries.
	ConfineProcess bool
}

// NetnsDriver is the built-in testbed: a tester namespace with a tx and an
// rx veth port, each the peer of a SUT port in a SUT namespace. The SUT's
// input veth gets GRO (which gives veth a NAPI ring) and threaded NAPI, with
// the NAPI thread pinned to its own CPU, so that all of the SUT's work runs
// in one kernel thread whose schedstat runtime is the SUT's CPU cost. A tc
// program on the SUT's output port counts and drops what the SUT forwards.
type NetnsDriver struct {
	opt         NetnsOptions
	tester, sut string
	in          string // unique: its NAPI thread is found by name
	env         Env
	napiPID     int
	txIfindex   int
	gen         *xdpGenerator
	sinkTC      perfSinkTCObjects
	sinkXDP     perfSinkXDPObjects
	sinkLink    link.Link
	sinkKind    SinkKind
	sinkMap     *ebpf.Map
	// latMap, latMiss: the latency histograms and miss counters of the
	// attached sink.
	latMap, latMiss *ebpf.Map
	genHold         link.Link
	// sutTasks are extra tasks whose CPU time is the SUT's (AddSUTTask),
	// with the last runtime read (kept once a task has ended).
	sutTasks []sutTask
	cleanups []func() error
	// confined: the affinity of this process's threads before Up.
	confined map[int]unix.CPUSet
	created  []string // namespaces to delete
	mu       sync.Mutex
}

type sutTask struct {
	tid  int
	last uint64
}

// Fixed port names inside the (unique) namespaces.
const (
	portTx  = "tx0"
	portRx  = "rx0"
	portOut = "out0"
	// portHold is a veth of the tester, always down, that holds the
	// generator program attached (see holdDispatcher).
	portHold = "gh0"
)

// NewNetnsDriver returns an unbuilt netns testbed.
func NewNetnsDriver(opt NetnsOptions) *NetnsDriver {
	if opt.Prefix == "" {
		opt.Prefix = "spf"
	}
	if opt.GenCPU == opt.SUTCPU && runtime.NumCPU() > 1 {
		opt.SUTCPU = (opt.GenCPU + 1) % runtime.NumCPU()
	}
	return &NetnsDriver{opt: opt}
}

func (d *NetnsDriver) Name() string { return "netns" }

// Names returns the tester and SUT namespace names (empty before Up).
func (d *NetnsDriver) Names() (tester, sut string) { return d.tester, d.sut }

func (d *NetnsDriver) Env() *Env            { return &d.env }
func (d *NetnsDriver) Generator() Generator { return d.gen }

func randHex(n int) string {
	b := make([]byte, n)
	f, err := os.Open("/dev/urandom")
	if err == nil {
		_, _ = f.Read(b)
		f.Close()
	}
	return fmt.Sprintf("%x", b)
}

// nsRun runs argv inside namespace ns (ip netns exec, which also remounts
// /sys for the namespace).
func nsRun(ns string, args ...string) (string, error) {
	full := append([]string{"ip", "netns", "exec", ns}, args...)
	out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

func nsRunAll(ns string, cmds [][]string) error {
	for _, c := range cmds {
		if _, err := nsRun(ns, c...); err != nil {
			return err
		}
	}
	return nil
}

// Up builds the testbed. On error it tears down what it made.
func (d *NetnsDriver) Up() (err error) {
	defer func() {
		if err != nil {
			_ = d.Down()
		}
	}()
	if d.opt.ConfineProcess {
		if err := d.confine(); err != nil {
			return err
		}
	}
	suffix := randHex(3)
	d.tester = d.opt.Prefix + "-t-" + suffix
	d.sut = d.opt.Prefix + "-s-" + suffix
	d.in = "pi" + suffix // ≤ 8 chars: "napi/pi123456-NNN" stays recognisable in comm
	for _, ns := range []string{d.tester, d.sut} {
		if err := nsutil.Create(ns); err != nil {
			return err
		}
		d.created = append(d.created, ns)
	}
	// Sysctls before interfaces exist: no DAD, no router solicitations.
	common := [][]string{
		{"sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0"},
		{"sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0"},
		{"sysctl", "-qw", "net.ipv6.conf.all.router_solicitations=0"},
		{"sysctl", "-qw", "net.ipv6.conf.default.router_solicitations=0"},
		{"ip", "link", "set", "lo", "up"},
	}
	if err := nsRunAll(d.tester, common); err != nil {
		return err
	}
	sutCmds := append(common,
		[]string{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
		[]string{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		[]string{"sysctl", "-qw", "net.ipv6.conf.all.seg6_enabled=1"},
		[]string{"sysctl", "-qw", "net.ipv6.conf.default.seg6_enabled=1"},
		[]string{"sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"},
		[]string{"sysctl", "-qw", "net.ipv4.conf.default.rp_filter=0"},
	)
	if err := nsRunAll(d.sut, sutCmds); err != nil {
		return err
	}
	if err := nsRunAll(d.tester, [][]string{
		{"ip", "link", "add", portTx, "type", "veth", "peer", "name", d.in, "netns", d.sut},
		{"ip", "link", "add", portRx, "type", "veth", "peer", "name", portOut, "netns", d.sut},
		{"ip", "addr", "add", TesterTx6 + "/64", "dev", portTx, "nodad"},
		{"ip", "addr", "add", TesterRx6 + "/64", "dev", portRx, "nodad"},
		{"ip", "link", "set", portTx, "up"},
		{"ip", "link", "set", portRx, "up"},
	}); err != nil {
		return err
	}
	macs := map[string]net.HardwareAddr{}
	for _, p := range []struct{ ns, dev string }{{d.tester, portTx}, {d.tester, portRx}, {d.sut, d.in}, {d.sut, portOut}} {
		if err := nsutil.Do(p.ns, func() error {
			ifi, err := net.InterfaceByName(p.dev)
			if err != nil {
				return err
			}
			macs[p.dev] = ifi.HardwareAddr
			if p.dev == portTx {
				d.txIfindex = ifi.Index
			}
			return nil
		}); err != nil {
			return fmt.Errorf("read %s: %w", p.dev, err)
		}
	}
	rxMAC := macs[portRx].String()
	if err := nsRunAll(d.sut, [][]string{
		{"ip", "addr", "add", SUTIn6 + "/64", "dev", d.in, "nodad"},
		{"ip", "addr", "add", SUTIn4 + "/24", "dev", d.in},
		{"ip", "addr", "add", SUTOut6 + "/64", "dev", portOut, "nodad"},
		{"ip", "addr", "add", SUTOut4 + "/24", "dev", portOut},
		{"ip", "link", "set", d.in, "up"},
		{"ip", "link", "set", portOut, "up"},
		{"ip", "-6", "neigh", "replace", TesterRx6, "lladdr", rxMAC, "dev", portOut, "nud", "permanent"},
		{"ip", "-4", "neigh", "replace", TesterRx4, "lladdr", rxMAC, "dev", portOut, "nud", "permanent"},
		{"ip", "-6", "neigh", "replace", TesterTx6, "lladdr", macs[portTx].String(), "dev", d.in, "nud", "permanent"},
		{"ip", "sr", "tunsrc", "set", SUTOut6},
		// GRO gives the veth a NAPI ring; threaded NAPI moves the SUT's
		// work into a kernel thread we can pin and account.
		{"ethtool", "-K", d.in, "gro", "on"},
	}); err != nil {
		return err
	}
	if err := d.setThreaded(true); err != nil {
		return err
	}
	sut := d.sut
	d.env = Env{
		In: d.in, Out: portOut,
		InMAC: macs[d.in], TxMAC: macs[portTx], OutMAC: macs[portOut], RxMAC: macs[portRx],
		Run:        func(args ...string) (string, error) { return nsRun(sut, args...) },
		Do:         func(fn func() error) error { return nsutil.Do(sut, fn) },
		AddSUTTask: d.addSUTTask,
		Cleanup: func(fn func() error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.cleanups = append(d.cleanups, fn)
		},
	}
	if err := loadPerfSinkTCObjects(&d.sinkTC, nil); err != nil {
		return fmt.Errorf("load tc sink: %w", err)
	}
	if err := loadPerfSinkXDPObjects(&d.sinkXDP, nil); err != nil {
		return fmt.Errorf("load xdp sink: %w", err)
	}
	if err := d.Sink(SinkForward); err != nil {
		return err
	}
	d.gen, err = newXDPGenerator(d.tester, d.txIfindex, d.opt.GenCPU, d.opt.GenNice)
	if err != nil {
		return err
	}
	return d.holdDispatcher()
}

// holdDispatcher attaches the generator program (generic XDP) to a veth of
// the tester that stays down and so never receives a frame. Every
// BPF_PROG_TEST_RUN of an XDP program adds it to the kernel's XDP
// dispatcher and removes it again at the end, and each change of the
// dispatcher waits for an RCU grace period (synchronize_rcu, twice per
// call): on this VM 10–30 ms without a frame sent, every chunk, so the
// SUT's 256-entry ring ran dry and its thread idled ≈ 10–25 % of every
// window. Attached, the program stays in the dispatcher (refcounted) and
// test runs no longer change it.
func (d *NetnsDriver) holdDispatcher() error {
	if err := nsRunAll(d.tester, [][]string{
		{"ip", "link", "add", portHold, "type", "veth", "peer", "name", portHold + "p"},
	}); err != nil {
		return err
	}
	return nsutil.Do(d.tester, func() error {
		ifi, err := net.InterfaceByName(portHold)
		if err != nil {
			return err
		}
		l, err := link.AttachXDP(link.XDPOptions{Interface: ifi.Index, Program: d.gen.objs.PerfGen, Flags: link.XDPGenericMode})
		if err != nil {
			return fmt.Errorf("attach generator to %s (dispatcher hold): %w", portHold, err)
		}
		d.genHold = l
		return nil
	})
}

// confine pins every thread of this process to the generator CPU and
// remembers their affinity for unconfine. Threads created later inherit it.
func (d *NetnsDriver) confine() error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	d.confined = map[int]unix.CPUSet{}
	var set unix.CPUSet
	set.Set(d.opt.GenCPU)
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var old unix.CPUSet
		if unix.SchedGetaffinity(tid, &old) != nil {
			continue // gone
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("confine thread %d to cpu %d: %w", tid, d.opt.GenCPU, err)
		}
		d.confined[tid] = old
	}
	return nil
}

// unconfine gives every thread of this process the affinity the first
// confined thread had (threads created since have no saved one).
func (d *NetnsDriver) unconfine() {
	if d.confined == nil {
		return
	}
	var all unix.CPUSet
	for _, old := range d.confined {
		all = old
		break
	}
	if ents, err := os.ReadDir("/proc/self/task"); err == nil {
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				old, ok := d.confined[tid]
				if !ok {
					old = all
				}
				_ = unix.SchedSetaffinity(tid, &old)
			}
		}
	}
	d.confined = nil
}

// findNAPIThread returns the PID of the kernel thread "napi/DEV-ID".
func findNAPIThread(dev string) (int, error) {
	prefix := "napi/" + dev + "-"
	if len(prefix) > 15 {
		prefix = prefix[:15]
	}
	for try := 0; try < 50; try++ {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			if err == nil && strings.HasPrefix(strings.TrimSpace(string(comm)), prefix) {
				return pid, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("no napi thread for %s (threaded NAPI on veth needs GRO): %w", dev, ErrNotSupported)
}

func pin(pid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(pid, &set)
}

// schedstat returns a thread's cumulative CPU time and run-queue wait
// time in ns (/proc/PID/schedstat: runtime, run_delay, timeslices).
func schedstat(pid int) (run, wait uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("short schedstat of %d: %q", pid, b)
	}
	if run, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return 0, 0, err
	}
	wait, err = strconv.ParseUint(f[1], 10, 64)
	return run, wait, err
}

// userHZ is the unit of /proc/stat (USER_HZ, 100 on Linux).
const userHZ = 100

// cpuSteal returns the steal time of a CPU in ns (/proc/stat, 10 ms
// resolution).
func cpuSteal(cpu int) (uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	prefix := "cpu" + strconv.Itoa(cpu) + " "
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 9 {
			return 0, fmt.Errorf("/proc/stat %s: no steal field", prefix)
		}
		v, err := strconv.ParseUint(f[8], 10, 64)
		return v * (1e9 / userHZ), err
	}
	return 0, fmt.Errorf("/proc/stat: no %s", prefix)
}

// setThreaded switches threaded NAPI on the SUT's input port. On, the NAPI
// thread is (re)found, pinned to the SUT CPU and reniced.
func (d *NetnsDriver) setThreaded(on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	if _, err := nsRun(d.sut, "sh", "-c", "echo "+v+" > /sys/class/net/"+d.in+"/threaded"); err != nil {
		return fmt.Errorf("threaded napi: %w", err)
	}
	if !on {
		d.napiPID = 0 // the kernel stops the thread
		return nil
	}
	pid, err := findNAPIThread(d.in)
	if err != nil {
		return err
	}
	d.napiPID = pid
	if err := pin(pid, d.opt.SUTCPU); err != nil {
		return fmt.Errorf("pin napi thread %d to cpu %d: %w", pid, d.opt.SUTCPU, err)
	}
	if d.opt.SUTNice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, pid, d.opt.SUTNice); err != nil {
			return fmt.Errorf("renice napi thread %d: %w", pid, err)
		}
	}
	return nil
}

// Sink moves the rx counter. Only one sink is attached at a time: stray
// programs tax every packet. Every sink runs in the SUT port's threaded
// NAPI thread on the SUT CPU, the XDP_DROP of the physical limit too: the
// generator then has its CPU to itself, as in every measurement. (Until
// 2026-11 the XDP_DROP ran with threaded NAPI off, i.e. in the softirq
// after each generator batch on the generator's CPU: generator and sink
// shared one CPU and the "physical limit" was half of what the testbed
// can carry — 4.0 instead of ≈ 8 Mpps.)
func (d *NetnsDriver) Sink(k SinkKind) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.napiPID == 0 {
		if err := d.setThreaded(true); err != nil {
			return err
		}
	}
	if d.sinkLink != nil {
		if err := d.sinkLink.Close(); err != nil {
			return fmt.Errorf("detach %s sink: %w", d.sinkKind, err)
		}
		d.sinkLink = nil
	}
	var l link.Link
	ns := d.sut
	if k == SinkWire {
		ns = d.tester
	}
	err := nsutil.Do(ns, func() error {
		var err error
		dev, port := d.in, d.in
		switch k {
		case SinkForward:
			port = portOut
		case SinkWire:
			dev, port = portRx, portRx
		}
		ifi, err := net.InterfaceByName(port)
		if err != nil {
			return err
		}
		switch k {
		case SinkForward:
			l, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: d.sinkTC.PerfSinkTc, Attach: ebpf.AttachTCXEgress})
			d.sinkMap, d.latMap, d.latMiss = d.sinkTC.PerfSinkCounts, d.sinkTC.PerfLat, d.sinkTC.PerfLatMiss
		case SinkStackDrop, SinkWire:
			l, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: d.sinkTC.PerfSinkTc, Attach: ebpf.AttachTCXIngress})
			d.sinkMap, d.latMap, d.latMiss = d.sinkTC.PerfSinkCounts, d.sinkTC.PerfLat, d.sinkTC.PerfLatMiss
		case SinkXDPDrop:
			l, err = link.AttachXDP(link.XDPOptions{Interface: ifi.Index, Program: d.sinkXDP.PerfSinkXdp, Flags: link.XDPDriverMode})
			d.sinkMap, d.latMap, d.latMiss = d.sinkXDP.PerfSinkCounts, d.sinkXDP.PerfLat, d.sinkXDP.PerfLatMiss
		default:
			return fmt.Errorf("unknown sink %d", k)
		}
		if err != nil {
			return fmt.Errorf("attach %s sink to %s: %w", k, dev, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.sinkLink, d.sinkKind = l, k
	return nil
}

// addSUTTask pins tid to the SUT CPU and adds its CPU time to SUTCPU.
func (d *NetnsDriver) addSUTTask(tid int) error {
	if err := pin(tid, d.opt.SUTCPU); err != nil {
		return fmt.Errorf("pin task %d to cpu %d: %w", tid, d.opt.SUTCPU, err)
	}
	run, _, err := schedstat(tid)
	if err != nil {
		return fmt.Errorf("task %d: %w", tid, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sutTasks = append(d.sutTasks, sutTask{tid: tid, last: run})
	return nil
}

// Sample reads the generator, sink and NAPI thread counters.
func (d *NetnsDriver) Sample() (Sample, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// The counters are read one after the other; if this thread loses its
	// CPU in between (it shares the generator's), they describe different
	// instants and the window's rate and ns/packet disagree. Read again
	// until one pass takes less than sampleSkew.
	var s Sample
	for try := 0; try < sampleTries; try++ {
		t0 := time.Now()
		var err error
		if s, err = d.read(); err != nil {
			return s, err
		}
		if dt := time.Since(t0); dt < sampleSkew || try == sampleTries-1 {
			s.At = t0.Add(dt / 2)
			break
		}
	}
	return s, nil
}

const (
	sampleSkew  = 300 * time.Microsecond
	sampleTries = 5
)

func (d *NetnsDriver) read() (Sample, error) {
	var s Sample
	var err error
	if s.Tx, err = d.gen.sent(); err != nil {
		return s, err
	}
	if s.Rx, err = sinkPackets(d.sinkMap); err != nil {
		return s, err
	}
	if d.napiPID != 0 {
		if s.SUTCPU, s.SUTWait, err = schedstat(d.napiPID); err != nil {
			return s, fmt.Errorf("napi thread: %w", err)
		}
	}
	for i := range d.sutTasks {
		t := &d.sutTasks[i]
		// A task's run-queue wait is not added to SUTWait: it mostly
		// waits for the SUT's other thread, which is the SUT's own work.
		if run, _, err := schedstat(t.tid); err == nil { // else it ended: keep its total
			t.last = run
		}
		s.SUTCPU += t.last
	}
	if s.SUTSteal, err = cpuSteal(d.opt.SUTCPU); err != nil {
		return s, err
	}
	return s, nil
}

// SetLatency turns the generator's stamps and both sinks' recording on
// or off (LatencyDriver).
func (d *NetnsDriver) SetLatency(on bool) error {
	var v uint32
	if on {
		v = 1
	}
	if err := d.sinkTC.PerfLatOn.Set(v); err != nil {
		return fmt.Errorf("tc sink latency switch: %w", err)
	}
	if err := d.sinkXDP.PerfLatOn.Set(v); err != nil {
		return fmt.Errorf("xdp sink latency switch: %w", err)
	}
	return d.gen.SetStamp(on)
}

// Stamped reports whether slot's frames carry a latency stamp.
func (d *NetnsDriver) Stamped(slot int) bool { return d.gen.Stamped(slot) }

// Latency reads the attached sink's histogram of slot and its misses.
func (d *NetnsDriver) Latency(slot int) (LatencyHist, LatencyMisses, error) {
	d.mu.Lock()
	hm, mm := d.latMap, d.latMiss
	d.mu.Unlock()
	return readLatency(hm, mm, slot)
}

// readLatency sums a sink's per-CPU histogram of slot and its misses.
func readLatency(hm, mm *ebpf.Map, slot int) (LatencyHist, LatencyMisses, error) {
	var h LatencyHist
	var m LatencyMisses
	if slot < 0 || slot >= latSlots {
		return h, m, fmt.Errorf("latency slot %d out of range 0..%d", slot, latSlots-1)
	}
	var per []perfSinkTCPerfLatHist
	if err := hm.Lookup(uint32(slot), &per); err != nil {
		return h, m, fmt.Errorf("read latency histogram %d: %w", slot, err)
	}
	for i := range per {
		c := &per[i]
		h.Add(&LatencyHist{Count: c.Count, SumNs: c.SumNs, MaxNs: c.MaxNs, Buckets: c.Buckets})
	}
	for r := range m {
		var n []uint64
		if err := mm.Lookup(uint32(r), &n); err != nil {
			return h, m, fmt.Errorf("read latency misses: %w", err)
		}
		for _, v := range n {
			m[r] += v
		}
	}
	return h, m, nil
}

func sinkPackets(m *ebpf.Map) (uint64, error) {
	var per []perfSinkTCPerfSinkCount
	if err := m.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("read sink counters: %w", err)
	}
	var n uint64
	for _, c := range per {
		n += c.Packets
	}
	return n, nil
}

// Down stops the generator, detaches the programs and deletes the
// namespaces (which removes the veths and routes with them).
func (d *NetnsDriver) Down() error {
	var errs []error
	d.mu.Lock()
	cleanups := d.cleanups
	d.cleanups, d.sutTasks = nil, nil
	d.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		if err := cleanups[i](); err != nil {
			errs = append(errs, err)
		}
	}
	if d.genHold != nil {
		_ = d.genHold.Close()
		d.genHold = nil
	}
	if d.gen != nil {
		if err := d.gen.Close(); err != nil {
			errs = append(errs, err)
		}
		d.gen = nil
	}
	if d.sinkLink != nil {
		_ = d.sinkLink.Close()
		d.sinkLink = nil
	}
	_ = d.sinkTC.Close()
	_ = d.sinkXDP.Close()
	for _, ns := range d.created {
		if err := nsutil.Delete(ns); err != nil {
			errs = append(errs, err)
		}
	}
	d.created = nil
	d.unconfine()
	return errors.Join(errs...)
}
