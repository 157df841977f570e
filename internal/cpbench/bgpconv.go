package cpbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
)

// BGPFigures are a routing: bgp run's convergence and routing memory.
// Result.Converged is when every leaf (every SR node with a locator: a
// speaker) had a BGP route covering every other leaf's locator (its own
// or, aggregated, its pod's block), since the apply
// from scratch began; until session 12 it was when the ingress and the
// egress alone reached each other, after the apply had ended.
type BGPFigures struct {
	// BGPLeaves is how many leaves' tables were watched, BGPPairs how many
	// (leaf, other leaf's locator) routes converged means.
	BGPLeaves int `json:"bgp_leaves,omitempty"`
	BGPPairs  int `json:"bgp_pairs,omitempty"`
	// FirstBGPRoute is when the first BGP route appeared on any leaf, since
	// the apply began: Converged − FirstBGPRoute is BGP's own share.
	FirstBGPRoute time.Duration `json:"bgp_first_route_ns,omitempty"`
	// ConvergedECMP is when every one of those routes also had all its
	// equal-cost next hops: one per first hop of a shortest path through
	// the fabric (a Clos leaf: every spine it is linked to).
	ConvergedECMP time.Duration `json:"converged_ecmp_ns,omitempty"`
	// BGPPolls is how many passes over the leaves' tables it took, BGPLost
	// how many times a leaf that reached every other leaf's locator was
	// found missing one again (a flap) before convergence.
	BGPPolls int `json:"bgp_polls,omitempty"`
	BGPLost  int `json:"bgp_lost,omitempty"`
	// BGPLeafRoutesMean and BGPLeafRoutesMax are the leaves' BGP routes
	// once converged: every locator and link of the fabric without
	// aggregation, their own pod's plus one per block with it.
	BGPLeafRoutesMean int `json:"bgp_leaf_routes_mean,omitempty"`
	BGPLeafRoutesMax  int `json:"bgp_leaf_routes_max,omitempty"`
	// SpeakersStarted is how many speakers the agent groups logged
	// starting (the lighter mode only), LastSpeakerStart when the last
	// of them started, since the apply began: the convergence after it
	// is BGP's own.
	SpeakersStarted  int           `json:"bgp_speakers_started,omitempty"`
	LastSpeakerStart time.Duration `json:"bgp_last_speaker_start_ns,omitempty"`
	// CPU is the CPU time (user + system) used from the apply's start
	// until convergence, by kind of process: bgpd, zebra and bfdd (all
	// the lab's routers), agents (the agents' or groups' processes) and
	// controller (the apply command: its whole run).
	CPU map[string]time.Duration `json:"bgp_cpu_ns,omitempty"`
	// FRR's memory per router (zebra + bgpd [+ bfdd]), after the applies.
	FRRRouters     int `json:"frr_routers,omitempty"`
	FRRRSSMeanKiB  int `json:"frr_rss_mean_kib,omitempty"`
	FRRRSSMaxKiB   int `json:"frr_rss_max_kib,omitempty"`
	FRRAnonMeanKiB int `json:"frr_anon_mean_kib,omitempty"`
	FRRAnonMaxKiB  int `json:"frr_anon_max_kib,omitempty"`
}

// bgpWant is, for each leaf of domain d, the locator of every other leaf
// and the number of equal-cost next hops a converged route to it has:
// the leaf's neighbours one hop nearer to the far leaf along the fabric's
// links between speakers (every node has its own ASN, so the AS path
// counts hops, and equal AS paths are ECMP: docs/routing.md).
func bgpWant(d *config.Domain) (map[string]map[netip.Prefix]int, error) {
	speaks := func(n string) bool {
		nd, ok := d.Nodes[n]
		return ok && nd.Role != config.RoleHost && nd.Role != config.RoleSF
	}
	adj := map[string][]string{}
	for i, l := range d.Links {
		if len(l.Endpoints) != 2 {
			return nil, fmt.Errorf("links[%d]: want 2 endpoints", i)
		}
		a, _, _ := strings.Cut(l.Endpoints[0], ":")
		z, _, _ := strings.Cut(l.Endpoints[1], ":")
		if speaks(a) && speaks(z) {
			adj[a] = append(adj[a], z)
			adj[z] = append(adj[z], a)
		}
	}
	loc := map[string]netip.Prefix{}
	for n, nd := range d.Nodes {
		if nd.Locator != "" && speaks(n) {
			p, err := netip.ParsePrefix(nd.Locator)
			if err != nil {
				return nil, fmt.Errorf("nodes.%s.locator: %w", n, err)
			}
			loc[n] = p
		}
	}
	want := map[string]map[netip.Prefix]int{}
	for n := range loc {
		want[n] = map[netip.Prefix]int{}
	}
	for dst, p := range loc {
		// Hops from every speaker to dst.
		dist := map[string]int{dst: 0}
		q := []string{dst}
		for len(q) > 0 {
			x := q[0]
			q = q[1:]
			for _, y := range adj[x] {
				if _, ok := dist[y]; !ok {
					dist[y] = dist[x] + 1
					q = append(q, y)
				}
			}
		}
		for src := range loc {
			ds, ok := dist[src]
			if src == dst || !ok {
				continue
			}
			hops := map[string]bool{}
			for _, y := range adj[src] {
				if dy, ok := dist[y]; ok && dy == ds-1 {
					hops[y] = true
				}
			}
			want[src][p] = len(hops)
		}
	}
	return want, nil
}

// bgpCheck compares a leaf's BGP routes (destination → next hops) with
// what it wants: reached when every wanted locator is covered by a route
// (the locator's own, or, with routing.summaries under bgp, its pod's
// aggregate), full when the most specific covering route, the one the
// kernel forwards by, also has at least the locator's equal-cost next
// hops.
func bgpCheck(want, have map[netip.Prefix]int) (reached, full bool) {
	// The route lengths present, longest first: a covering route is
	// looked up at each (a leaf holds a handful of lengths).
	var lens []int
	seen := map[int]bool{}
	for p := range have {
		if !seen[p.Bits()] {
			seen[p.Bits()] = true
			lens = append(lens, p.Bits())
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(lens)))
	reached, full = true, true
	for p, w := range want {
		h, ok := 0, false
		for _, l := range lens {
			if l > p.Bits() {
				continue
			}
			if h, ok = have[netip.PrefixFrom(p.Addr(), l).Masked()]; ok {
				break
			}
		}
		if !ok {
			return false, false
		}
		if h < w {
			full = false
		}
	}
	return reached, full
}

// bgpWatch watches every leaf's table from before the apply from scratch
// until every leaf has converged (with full ECMP), so that Converged is
// the moment it happened, not the end of an apply that waits for the
// speakers' sessions (docs/routing.md).
type bgpWatch struct {
	start   time.Time
	leaves  []*leafWatch
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	figures BGPFigures
	reached time.Duration
	err     error
}

type leafWatch struct {
	name          string
	h             *netlink.Handle
	want          map[netip.Prefix]int
	reached, full bool
}

// watchBGP opens a netlink socket in every leaf's namespace of lab
// labName and starts watching; wait returns the figures.
func watchBGP(ctx context.Context, labName, domain string, limit time.Duration) (*bgpWatch, error) {
	d, err := config.Parse([]byte(domain), ".")
	if err != nil {
		return nil, err
	}
	want, err := bgpWant(d)
	if err != nil {
		return nil, err
	}
	w := &bgpWatch{done: make(chan struct{})}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ns, err := netns.GetFromPath(nsutil.Path(lab.NetnsName(labName, n)))
		if err != nil {
			w.close()
			return nil, fmt.Errorf("leaf %s: %w", n, err)
		}
		h, err := netlink.NewHandleAt(ns)
		ns.Close()
		if err != nil {
			w.close()
			return nil, fmt.Errorf("leaf %s: netlink: %w", n, err)
		}
		w.leaves = append(w.leaves, &leafWatch{name: n, h: h, want: want[n]})
		w.figures.BGPPairs += len(want[n])
	}
	w.figures.BGPLeaves = len(w.leaves)
	ctx, w.cancel = context.WithTimeout(ctx, limit)
	w.start = time.Now()
	go w.run(ctx)
	return w, nil
}

// bgpRoutes is a table's BGP routes (protocol nodestate.ProtoBGP, main
// table): destination → next hops.
func bgpRoutes(h *netlink.Handle) (map[netip.Prefix]int, error) {
	rs, err := h.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Protocol: nodestate.ProtoBGP, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	out := make(map[netip.Prefix]int, len(rs))
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		p := netip.PrefixFrom(a.Unmap(), ones)
		out[p] += max(len(r.MultiPath), 1)
	}
	return out, nil
}

// run polls the leaves not yet converged, pass after pass (paced by the
// pass's own length, at least 200 ms, so that watching costs at most
// half a core of the apply it measures), then checks every leaf once
// more: a route lost after it was seen is an error (a flap).
func (w *bgpWatch) run(ctx context.Context) {
	defer close(w.done)
	var first, reached, full time.Duration
	for {
		t0 := time.Now()
		allReached, allFull := true, true
		for _, l := range w.leaves {
			if l.full {
				continue
			}
			have, err := bgpRoutes(l.h)
			if err != nil {
				w.setErr(fmt.Errorf("leaf %s: routes: %w", l.name, err))
				return
			}
			if len(have) > 0 && first == 0 {
				first = time.Since(w.start)
			}
			r, f := bgpCheck(l.want, have)
			if l.reached && !r {
				w.mu.Lock()
				w.figures.BGPLost++
				w.mu.Unlock()
			}
			l.reached, l.full = r, f
			allReached = allReached && r
			allFull = allFull && f
		}
		w.mu.Lock()
		w.figures.BGPPolls++
		w.mu.Unlock()
		if allReached && reached == 0 {
			reached = time.Since(w.start)
		}
		if allFull {
			full = time.Since(w.start)
			break
		}
		pause := max(200*time.Millisecond, time.Since(t0))
		select {
		case <-ctx.Done():
			w.setErr(fmt.Errorf("BGP did not converge: %d of %d leaves reach every other leaf's locator, %d with full ECMP", count(w.leaves, true), len(w.leaves), count(w.leaves, false)))
			return
		case <-time.After(pause):
		}
	}
	// The figures stand even if the check below finds a route lost.
	w.mu.Lock()
	w.figures.FirstBGPRoute, w.reached, w.figures.ConvergedECMP = first, reached, full
	w.mu.Unlock()
	total, most := 0, 0
	for _, l := range w.leaves {
		have, err := bgpRoutes(l.h)
		if err != nil {
			w.setErr(fmt.Errorf("leaf %s: routes: %w", l.name, err))
			return
		}
		total, most = total+len(have), max(most, len(have))
		if r, f := bgpCheck(l.want, have); !r || !f {
			w.setErr(fmt.Errorf("leaf %s lost a BGP route or next hop after it had them all", l.name))
			return
		}
	}
	w.mu.Lock()
	if len(w.leaves) > 0 {
		w.figures.BGPLeafRoutesMean, w.figures.BGPLeafRoutesMax = total/len(w.leaves), most
	}
	w.mu.Unlock()
}

func count(ls []*leafWatch, reached bool) int {
	n := 0
	for _, l := range ls {
		if (reached && l.reached) || (!reached && l.full) {
			n++
		}
	}
	return n
}

func (w *bgpWatch) setErr(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

// wait waits for the watch to end (converged, or its limit) and returns
// its figures and when every pair was reached.
func (w *bgpWatch) wait() (BGPFigures, time.Duration, error) {
	<-w.done
	w.close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.figures, w.reached, w.err
}

// close stops the watch (if it runs) and closes the sockets; the figures
// stay.
func (w *bgpWatch) close() {
	if w.cancel != nil {
		w.cancel()
	}
	for _, l := range w.leaves {
		if l.h != nil {
			l.h.Close()
			l.h = nil
		}
	}
}

// frrPIDs are the lab's FRR daemons' pids, by daemon (bgpd, zebra,
// bfdd), each counted once (cpuOf's map).
func frrPIDs(labName string) map[string]map[int]int {
	m := map[string]map[int]int{}
	if !eachFRRDaemon(labName, func(_, daemon string, pid int) {
		if m[daemon] == nil {
			m[daemon] = map[int]int{}
		}
		m[daemon][pid] = 1
	}) {
		return nil
	}
	return m
}

// eachFRRDaemon calls fn with each running daemon of lab labName's FRR
// instances (the pid files in each router's FRR directory); false when
// the lab cannot be read.
func eachFRRDaemon(labName string, fn func(node, daemon string, pid int)) bool {
	l, err := lab.Get(labName)
	if err != nil {
		return false
	}
	for node := range l.FRR {
		dir, _ := l.FRRDir(node)
		pids, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, pf := range pids {
			b, err := os.ReadFile(pf)
			if err != nil {
				continue
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				continue
			}
			fn(node, strings.TrimSuffix(filepath.Base(pf), ".pid"), pid)
		}
	}
	return true
}

// speakerStarts reads the agent groups' JSON logs (group*.log in dir):
// how many speakers started, and when the last one did.
func speakerStarts(dir string) (n int, last time.Time) {
	logs, _ := filepath.Glob(filepath.Join(dir, "group*.log"))
	for _, lf := range logs {
		b, err := os.ReadFile(lf)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, `"bgp speaker started"`) {
				continue
			}
			var e struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &e) != nil || e.Msg != "bgp speaker started" {
				continue
			}
			n++
			if e.Time.After(last) {
				last = e.Time
			}
		}
	}
	return n, last
}

// frrMemory adds the memory of lab labName's FRR instances (each
// router's daemons together: pid files in its FRR directory) to f.
func frrMemory(labName string, f *BGPFigures) {
	rssOf, anonOf := map[string]int{}, map[string]int{}
	eachFRRDaemon(labName, func(node, _ string, pid int) {
		rssOf[node] += rssKiB(pid, "status", "VmRSS:")
		anonOf[node] += rssKiB(pid, "status", "RssAnon:")
	})
	var rss, anon []int
	for node, r := range rssOf {
		if r > 0 {
			rss, anon = append(rss, r), append(anon, anonOf[node])
		}
	}
	f.FRRRouters = len(rss)
	for i := range rss {
		f.FRRRSSMeanKiB += rss[i]
		f.FRRAnonMeanKiB += anon[i]
		f.FRRRSSMaxKiB = max(f.FRRRSSMaxKiB, rss[i])
		f.FRRAnonMaxKiB = max(f.FRRAnonMaxKiB, anon[i])
	}
	if len(rss) > 0 {
		f.FRRRSSMeanKiB /= len(rss)
		f.FRRAnonMeanKiB /= len(rss)
	}
}
