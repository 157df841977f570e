package pools

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/health"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/pool/datapath"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

var (
	srcAddr = netip.MustParseAddr("fc00:1a::a")
	dstAddr = netip.MustParseAddr("fc00:4d::d")
)

const dport = 9000

type env struct {
	*labenv.Env
	t    *testing.T
	he   *datapath.Headend
	pool pool.Pool
	sids map[string]netip.Addr
	rcv  *receiver
}

// setup brings up testdata/pooled.yaml's lab (fw1 is a pool of fw1, fw2
// and fw3), applies it (the selector at ingress) and opens the
// selector's maps; onFailure re-programs the pool's policy.
func setup(t *testing.T, onFailure string) *env {
	return setupFile(t, "testdata/pooled.yaml", onFailure)
}

// setupFile is setup with another domain file of the same shape.
func setupFile(t *testing.T, file, onFailure string) *env {
	return setupAs(t, file, onFailure, "s9p")
}

// setupAs is setupFile with the lab's name starting with prefix.
func setupAs(t *testing.T, file, onFailure, prefix string) *env {
	le := labenv.New(t, labenv.Options{File: file, Prefix: prefix})
	if _, err := le.Session(le.Domain).Apply(context.Background()); err != nil {
		t.Fatalf("apply: %v", err)
	}
	sids, err := le.Domain.SIDs()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{Env: le, t: t, sids: sids}
	ns := e.NS("ingress")
	specs, err := datapath.Specs(ns)
	if err != nil || len(specs) != 1 {
		t.Fatalf("apply recorded pools %v (%v), want fw1's", specs, err)
	}
	e.pool = specs[0].Pool
	e.he, err = datapath.Reopen(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.he.Close() })
	if onFailure != e.pool.OnFailure {
		e.pool.OnFailure = onFailure
		if err := e.he.Program([]pool.Pool{e.pool}); err != nil {
			t.Fatal(err)
		}
	}
	e.rcv = listen(t, e.NS("d"))
	return e
}

// receiver counts datagrams per source port in d.
type receiver struct {
	mu  sync.Mutex
	got map[int]int
}

func listen(t *testing.T, ns string) *receiver {
	r := &receiver{got: map[int]int{}}
	var c *net.UDPConn
	if err := nsutil.Do(ns, func() error {
		var err error
		c, err = net.ListenUDP("udp6", &net.UDPAddr{Port: dport})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 2000)
		for {
			_, from, err := c.ReadFromUDP(b)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.got[from.Port]++
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *receiver) count(port int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[port]
}

func flowOf(port int) pool.Flow {
	return pool.Flow{Src: srcAddr, Dst: dstAddr, Sport: uint16(port), Dport: dport, Proto: 17}
}

// send sends one datagram per port from s, then resends those d has not
// got (neighbour discovery may hold the first ones) until every port got
// one more; it returns how many datagrams it sent per port.
func (e *env) send(ports []int) map[int]int {
	e.t.Helper()
	sent := map[int]int{}
	base := map[int]int{}
	for _, p := range ports {
		base[p] = e.rcv.count(p)
	}
	one := func(p int) {
		err := nsutil.Do(e.NS("s"), func() error {
			c, err := net.DialUDP("udp6", &net.UDPAddr{IP: srcAddr.AsSlice(), Port: p}, &net.UDPAddr{IP: dstAddr.AsSlice(), Port: dport})
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("pool test datagram"))
			return err
		})
		if err != nil {
			e.t.Fatal(err)
		}
		sent[p]++
	}
	for _, p := range ports {
		one(p)
	}
	for round := 0; ; round++ {
		var missing []int
		deadline := time.Now().Add(2 * time.Second)
		for {
			missing = missing[:0]
			for _, p := range ports {
				if e.rcv.count(p) <= base[p] {
					missing = append(missing, p)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(missing) == 0 {
			return sent
		}
		if round == 5 {
			e.t.Fatalf("%d of %d flows never reached d (ports %v...)", len(missing), len(ports), missing[:min(5, len(missing))])
		}
		for _, p := range missing {
			one(p)
		}
	}
}

// expect is what the selector's counters should have moved by for sent
// under the liveness word live (moved: flows failover keeps elsewhere).
func (e *env) expect(sent map[int]int, live uint32, moved map[int]int) []uint64 {
	want := make([]uint64, len(e.pool.Instances))
	for p, n := range sent {
		d := e.pool.Decide(live, flowOf(p).Hash(e.pool.Symmetric))
		inst := d.Instance
		if m, ok := moved[p]; ok && live>>m&1 == 1 {
			inst = m
		}
		if inst >= 0 {
			want[inst] += uint64(n)
		}
	}
	return want
}

func (e *env) stats() datapath.Stats {
	e.t.Helper()
	st, err := e.he.Stats(0, len(e.pool.Instances))
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func delta(a, b datapath.Stats) []uint64 {
	out := make([]uint64, len(a.Instances))
	for i := range out {
		out[i] = b.Instances[i] - a.Instances[i]
	}
	return out
}

func ports(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// checker runs the health checks until the test ends.
func (e *env) checker(targets []health.Target, live health.Liveness) (*health.Checker, *bytes.Buffer) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, nil))
	c := health.New(targets, live, log)
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := c.Start(ctx)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cancel()
		wait()
	})
	return c, &buf
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// waitHealth waits until instance name of the checker is up (or down).
func waitHealth(t *testing.T, c *health.Checker, name string, up bool) health.InstanceStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range c.Status() {
			if s.Instance == name && s.Up == up && s.Transitions > 0 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became up=%v: %+v", name, up, c.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reportOf reads the node's health report (what status shows).
func reportOf(t *testing.T, ns string) func() health.Report {
	return func() health.Report {
		r, err := health.ReadReport(ns)
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			return health.Report{}
		}
		return *r
	}
}

// waitReport waits until the report says instance name is up (or down),
// after a transition when moved.
// waitLive waits up to 10 s for pool 0's liveness word to satisfy ok and
// returns the last word read: the checker publishes its report before it
// writes the word (status reads them in that order), so a report that
// says down can be seen an instant before the word does.
func waitLive(t *testing.T, e *env, ok func(uint32) bool) uint32 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		live, err := e.he.Live(0)
		if err != nil {
			t.Fatal(err)
		}
		if ok(live) || time.Now().After(deadline) {
			return live
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitReport(t *testing.T, rep func() health.Report, name string, up, moved bool) health.InstanceStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range rep().Instances {
			if s.Instance == name && s.Up == up && (!moved || s.Last != nil && s.Last.Up == up) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reported up=%v: %+v", name, up, rep())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type discard struct{}

func (discard) SetInstance(int, int, bool) error { return nil }

// TestPoolFailover: flows spread over three instances as the model says
// (weights 1:1:1) and stick; an SF that keeps its carrier but stops
// forwarding (nft forward policy drop) is found by the in-band probe (not
// by its carrier check) and only its flows move; when it recovers the
// moved flows stay and new flows return; an SF whose link goes down is
// found by the carrier check.
func TestPoolFailover(t *testing.T) {
	e := setup(t, pool.Failover)
	if e.sids["chains.web.egress"] == (netip.Addr{}) {
		t.Fatalf("no egress SID: %v", e.sids)
	}
	old := ports(20000, 150)

	s0 := e.stats()
	sent := e.send(old)
	s1 := e.stats()
	want := e.expect(sent, e.pool.AllLive(), nil)
	if got := delta(s0, s1); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spread: instances got %v packets, model %v", got, want)
	}
	for i, n := range want {
		if n == 0 {
			t.Fatalf("instance %d got no flow of %d", i, len(old))
		}
	}

	// The node's checks as segchain health and the agent run them: the
	// pool's health (srv6, the default) for every instance.
	var logbuf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logbuf, &mu}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		health.RunNode(ctx, e.NS("ingress"), func(n string) (string, bool) { return e.NS(n), true }, log, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	c := reportOf(t, e.NS("ingress"))
	waitReport(t, c, "fw3", true, false)
	// Carrier checks of fw1 and fw2, alongside and written nowhere: fw2's
	// stays up when its SF stops forwarding, fw1's sees its link go.
	cc, _ := e.checker([]health.Target{
		{Pool: e.pool.Name, Instance: 0, Name: "fw1", Spec: health.Spec{Kind: health.Carrier}, Netns: e.NS("nfv1"), Iface: "eth-sf1"},
		{Pool: e.pool.Name, Instance: 1, Name: "fw2", Spec: health.Spec{Kind: health.Carrier}, Netns: e.NS("nfv2"), Iface: "eth-sf2"}}, discard{})

	// sf2 keeps its carrier but stops forwarding.
	testutil.Exec(t, e.NS("sf2"), "nft", "add table inet s9p; add chain inet s9p s9pfwd { type filter hook forward priority 0; policy drop; }")
	st := waitReport(t, c, "fw2", false, true)
	if !strings.Contains(st.Last.Reason, "srv6") {
		t.Errorf("fw2's transition reason %q does not name the in-band probe", st.Last.Reason)
	}
	if live := waitLive(t, e, func(l uint32) bool { return l == 0b101 }); live != 0b101 {
		t.Fatalf("liveness word %03b after fw2 failed, want 101", live)
	}
	for _, s := range cc.Status() {
		if !s.Up {
			t.Errorf("%s's carrier check says down: it should not see a forwarding failure", s.Instance)
		}
	}
	// What status and metrics read: the selector's SID, fw2 down.
	sc, err := datapath.NodeKind{}.Counters(e.NS("ingress"))
	if err != nil || len(sc) != 1 || sc[0].Detail["up-fw2"] != 0 || sc[0].Detail["up-fw1"] != 1 || !strings.Contains(sc[0].Route, "fw2 down since") {
		t.Errorf("status counters: %+v (%v)", sc, err)
	}

	// Every flow still arrives; only fw2's moved.
	s2 := e.stats()
	sent = e.send(old)
	s3 := e.stats()
	want = e.expect(sent, 0b101, nil)
	if got := delta(s2, s3); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after fw2 failed: instances got %v packets, model %v", got, want)
	}
	moved := map[int]int{}
	for _, p := range old {
		h := flowOf(p).Hash(e.pool.Symmetric)
		before := e.pool.Decide(e.pool.AllLive(), h).Instance
		after := e.pool.Decide(0b101, h).Instance
		if before != after {
			if before != 1 {
				t.Fatalf("flow %d moved from %d (healthy) to %d", p, before, after)
			}
			moved[p] = after
		}
	}
	t.Logf("fw2 failed: %d of %d flows moved (all of fw2's), %d packets counted as moved", len(moved), len(old), s3.Moved-s2.Moved)
	if s3.Moved-s2.Moved == 0 {
		t.Error("no packet counted as moved")
	}

	// Recovery: the moved flows stay, new flows go to fw2 again.
	testutil.Exec(t, e.NS("sf2"), "nft", "delete table inet s9p")
	waitReport(t, c, "fw2", true, true)
	fresh := ports(30000, 150)
	s4 := e.stats()
	sent = e.send(append(append([]int{}, old...), fresh...))
	s5 := e.stats()
	want = e.expect(sent, e.pool.AllLive(), moved)
	if got := delta(s4, s5); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after fw2 recovered: instances got %v packets, model (moved flows stay) %v", got, want)
	}

	// sf1's link goes down: the carrier check on nfv1 sees it.
	testutil.Exec(t, e.NS("sf1"), "ip", "link", "set", "eth-nfv1", "down")
	waitHealth(t, cc, "fw1", false)
	waitReport(t, c, "fw1", false, true)
	if live := waitLive(t, e, func(l uint32) bool { return l&1 == 0 }); live&1 != 0 {
		t.Fatalf("liveness word %03b after fw1's carrier went, want bit 0 clear", live)
	}
	e.send(ports(40000, 30))

	// fw3 (SR-aware End.AN.FW) answered its in-band probes throughout.
	for _, s := range c().Instances {
		if s.Instance == "fw3" && (!s.Up || s.Checks == 0 || s.Failures*2 > s.Checks) {
			t.Errorf("fw3's in-band probes: %+v", s)
		}
	}

	mu.Lock()
	logs := logbuf.String()
	mu.Unlock()
	for _, w := range []string{"pool instance down", "instance=fw2", "pool instance up", "instance=fw1"} {
		if !strings.Contains(logs, w) {
			t.Errorf("log lacks %q:\n%s", w, logs)
		}
	}
}

// TestPoolBypassAndDrop: with on_failure bypass the failed instance's
// flows skip the function (delivered, counted); with drop they are
// dropped (counted) and the healthy instances' flows are untouched.
func TestPoolBypassAndDrop(t *testing.T) {
	e := setup(t, pool.Bypass)
	fl := ports(21000, 90)
	var failed, healthy []int
	for _, p := range fl {
		if e.pool.Decide(e.pool.AllLive(), flowOf(p).Hash(e.pool.Symmetric)).Instance == 1 {
			failed = append(failed, p)
		} else {
			healthy = append(healthy, p)
		}
	}
	if err := e.he.SetInstance(0, 1, false); err != nil {
		t.Fatal(err)
	}
	s0 := e.stats()
	sent := e.send(fl) // every flow arrives: fw2's bypass it
	s1 := e.stats()
	nf := 0
	for _, p := range failed {
		nf += sent[p]
	}
	if int(s1.Bypass-s0.Bypass) != nf || nf == 0 {
		t.Fatalf("bypass: %d packets counted, %d sent on fw2's flows (> 0)", s1.Bypass-s0.Bypass, nf)
	}

	e.pool.OnFailure = pool.Drop
	if err := e.he.Program([]pool.Pool{e.pool}); err != nil {
		t.Fatal(err)
	}
	if err := e.he.SetInstance(0, 1, false); err != nil {
		t.Fatal(err)
	}
	s2 := e.stats()
	e.send(healthy)
	for _, p := range failed {
		err := nsutil.Do(e.NS("s"), func() error {
			c, err := net.DialUDP("udp6", &net.UDPAddr{IP: srcAddr.AsSlice(), Port: p}, &net.UDPAddr{IP: dstAddr.AsSlice(), Port: dport})
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("dropped"))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the drops to be counted (the datagrams cross two namespaces).
	deadline := time.Now().Add(10 * time.Second)
	for e.stats().Drop-s2.Drop < uint64(len(failed)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if d := e.stats().Drop - s2.Drop; d != uint64(len(failed)) {
		t.Fatalf("drop: %d packets counted, %d sent on fw2's flows", d, len(failed))
	}
	for _, p := range failed {
		if n := e.rcv.count(p); n != 1 { // the bypassed datagram only
			t.Errorf("flow %d: d got %d datagrams, want 1 (the bypassed one; the dropped one must not arrive)", p, n)
		}
	}
}
