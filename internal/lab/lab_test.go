package lab

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// newLabName returns a random lab name and registers its teardown before
// the lab exists, so a failing test never leaks namespaces.
func newLabName(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "ip")
	name := testutil.UniqueName("t-")
	t.Cleanup(func() {
		if err := Down(name); err != nil && !errors.Is(err, ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
	})
	return name
}

// threeNodes is h1 —eth0— r —eth1/eth0— h2, with equal interface names on
// both sides of the first link.
func threeNodes(name string) Topology {
	p := netip.MustParsePrefix
	return Topology{
		Name:  name,
		Nodes: []Node{{Name: "h1"}, {Name: "r", Router: true}, {Name: "h2"}},
		Links: []Link{
			{
				A: Endpoint{Node: "h1", Iface: "eth0", Addrs: []netip.Prefix{p("fc00:1::1/64"), p("10.0.1.1/24")}},
				B: Endpoint{Node: "r", Iface: "eth0", Addrs: []netip.Prefix{p("fc00:1::2/64"), p("10.0.1.2/24")}},
			},
			{
				A: Endpoint{Node: "r", Iface: "eth1", Addrs: []netip.Prefix{p("fc00:2::2/64")}},
				B: Endpoint{Node: "h2", Iface: "eth0", Addrs: []netip.Prefix{p("fc00:2::3/64")}},
			},
		},
	}
}

// ipJSON runs `ip -n ns -j ARGS` and decodes its output.
func ipJSON(t *testing.T, ns string, v any, args ...string) {
	t.Helper()
	out := testutil.Exec(t, "", append([]string{"ip", "-n", ns, "-j"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

type ipAddr struct {
	IfName   string `json:"ifname"`
	Address  string `json:"address"`
	AddrInfo []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
		Scope     string `json:"scope"`
	} `json:"addr_info"`
	Flags []string `json:"flags"`
}

// globalAddrs returns "iface addr/len" for every global address in ns.
func globalAddrs(t *testing.T, ns string) []string {
	var links []ipAddr
	ipJSON(t, ns, &links, "addr", "show")
	var got []string
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if a.Scope == "global" {
				got = append(got, l.IfName+" "+netip.PrefixFrom(netip.MustParseAddr(a.Local), a.PrefixLen).String())
			}
		}
	}
	sort.Strings(got)
	return got
}

func macOf(t *testing.T, ns, dev string) string {
	var links []ipAddr
	ipJSON(t, ns, &links, "link", "show", "dev", dev)
	if len(links) != 1 {
		t.Fatalf("ip -n %s link show dev %s: %d links", ns, dev, len(links))
	}
	return links[0].Address
}

func sysctl(t *testing.T, ns, key string) string {
	return strings.TrimSpace(testutil.Exec(t, ns, "sysctl", "-n", key))
}

func TestUpDown(t *testing.T) {
	name := newLabName(t)
	// A namespace the lab does not own, named as if it could be one of its
	// nodes: it must survive lab down.
	bystander := NetnsName(name, "zz")
	if err := nsutil.Create(bystander); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsutil.Delete(bystander) })

	l, err := Up(threeNodes(name))
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	ns := func(node string) string {
		n, err := l.Netns(node)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Run("state", func(t *testing.T) {
		got, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"h1": "sc-" + name + "-h1", "r": "sc-" + name + "-r", "h2": "sc-" + name + "-h2"}
		if diff := cmp.Diff(want, got.Nodes); diff != "" {
			t.Errorf("nodes (-want +got):\n%s", diff)
		}
		if !got.Complete || len(got.Links) != 2 {
			t.Errorf("state: complete=%v links=%d, want true 2", got.Complete, len(got.Links))
		}
		labs, err := List()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, x := range labs {
			found = found || x.Name == name
		}
		if !found {
			t.Errorf("List() does not include %s", name)
		}
		if _, err := l.Netns("nope"); err == nil {
			t.Error("Netns(nope) succeeded")
		}
	})
	// Checked before anything else: Up must hand out a lab whose links carry
	// traffic already (carrier up, link-local assigned).
	t.Run("links ready on return", func(t *testing.T) {
		for _, c := range []struct{ node, dev string }{{"h1", "eth0"}, {"r", "eth0"}, {"r", "eth1"}, {"h2", "eth0"}} {
			var links []struct {
				OperState string `json:"operstate"`
			}
			ipJSON(t, ns(c.node), &links, "link", "show", "dev", c.dev)
			if len(links) != 1 || links[0].OperState != "UP" {
				t.Errorf("%s %s: operstate %+v, want UP", c.node, c.dev, links)
			}
			var addrs []ipAddr
			ipJSON(t, ns(c.node), &addrs, "-6", "addr", "show", "dev", c.dev, "scope", "link")
			n := 0 // ip 6.1 adds an empty addr_info entry when filtering
			for _, l := range addrs {
				for _, a := range l.AddrInfo {
					if a.Scope == "link" && strings.HasPrefix(a.Local, "fe80:") {
						n++
					}
				}
			}
			if n != 1 {
				t.Errorf("%s %s: %d link-local addresses, want 1: %+v", c.node, c.dev, n, addrs)
			}
		}
	})
	t.Run("namespaces", func(t *testing.T) {
		out := testutil.Exec(t, "", "ip", "netns", "list")
		for _, node := range []string{"h1", "r", "h2"} {
			if !strings.Contains(out, ns(node)) {
				t.Errorf("ip netns list lacks %s:\n%s", ns(node), out)
			}
		}
	})
	t.Run("addresses", func(t *testing.T) {
		want := map[string][]string{
			"h1": {"eth0 10.0.1.1/24", "eth0 fc00:1::1/64"},
			"r":  {"eth0 10.0.1.2/24", "eth0 fc00:1::2/64", "eth1 fc00:2::2/64"},
			"h2": {"eth0 fc00:2::3/64"},
		}
		for node, w := range want {
			if diff := cmp.Diff(w, globalAddrs(t, ns(node))); diff != "" {
				t.Errorf("%s global addresses (-want +got):\n%s", node, diff)
			}
		}
	})
	t.Run("sysctls", func(t *testing.T) {
		tests := []struct{ node, key, want string }{
			{"r", "net.ipv6.conf.all.forwarding", "1"},
			{"r", "net.ipv4.ip_forward", "1"},
			{"h1", "net.ipv6.conf.all.forwarding", "0"},
			{"h1", "net.ipv6.conf.eth0.seg6_enabled", "1"},
			{"r", "net.ipv6.conf.eth1.seg6_enabled", "1"},
			{"h2", "net.ipv6.conf.lo.seg6_enabled", "1"},
			{"h2", "net.ipv6.conf.all.seg6_enabled", "1"},
			{"h1", "net.ipv6.conf.all.accept_ra", "0"},
			{"h1", "net.ipv6.conf.eth0.router_solicitations", "0"},
			{"h2", "net.ipv6.conf.eth0.accept_dad", "0"},
			{"h2", "net.ipv6.conf.eth0.keep_addr_on_down", "1"},
		}
		for _, tt := range tests {
			if got := sysctl(t, ns(tt.node), tt.key); got != tt.want {
				t.Errorf("%s %s = %s, want %s", tt.node, tt.key, got, tt.want)
			}
		}
	})
	t.Run("neighbours", func(t *testing.T) {
		var neigh []struct {
			Dst    string   `json:"dst"`
			LLAddr string   `json:"lladdr"`
			State  []string `json:"state"`
		}
		ipJSON(t, ns("h1"), &neigh, "neigh", "show", "dev", "eth0")
		got := map[string]string{}
		for _, n := range neigh {
			got[n.Dst] = n.LLAddr + " " + strings.Join(n.State, ",")
		}
		rmac := macOf(t, ns("r"), "eth0")
		ll := linkLocalOfMAC(t, rmac)
		want := map[string]string{
			"fc00:1::2": rmac + " PERMANENT",
			"10.0.1.2":  rmac + " PERMANENT",
			ll:          rmac + " PERMANENT",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("h1 eth0 neighbours (-want +got):\n%s", diff)
		}
	})
	t.Run("ping across a link", func(t *testing.T) {
		for _, dst := range []string{"fc00:1::2", "10.0.1.2"} {
			if err := testutil.Ping(ns("h1"), netip.MustParseAddr(dst), 5*time.Second); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("ping oracle can fail", func(t *testing.T) {
		if err := testutil.Ping(ns("h1"), netip.MustParseAddr("fc00:1::99"), time.Second); err == nil {
			t.Error("ping to an address nobody has succeeded")
		}
	})
	t.Run("ping through the router", func(t *testing.T) {
		testutil.Exec(t, ns("h1"), "ip", "-6", "route", "add", "fc00:2::/64", "via", "fc00:1::2")
		testutil.Exec(t, ns("h2"), "ip", "-6", "route", "add", "fc00:1::/64", "via", "fc00:2::2")
		if err := testutil.Ping(ns("h1"), netip.MustParseAddr("fc00:2::3"), 5*time.Second); err != nil {
			t.Error(err)
		}
	})

	if err := Down(name); err != nil {
		t.Fatalf("Down: %v", err)
	}
	for _, node := range []string{"h1", "r", "h2"} {
		if nsutil.Exists(ns(node)) {
			t.Errorf("namespace %s survived Down", ns(node))
		}
	}
	if !nsutil.Exists(bystander) {
		t.Errorf("Down deleted %s, which the lab did not create", bystander)
	}
	if _, err := os.Stat(statePath(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file after Down: %v", err)
	}
	if err := Down(name); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Down = %v, want ErrNotFound", err)
	}
}

// linkLocalOfMAC computes the EUI-64 link-local address independently of
// linkLocal, from the text form ip prints.
func linkLocalOfMAC(t *testing.T, mac string) string {
	t.Helper()
	var b [6]byte
	p := strings.Split(mac, ":")
	if len(p) != 6 {
		t.Fatalf("bad mac %q", mac)
	}
	for i, s := range p {
		var v int
		for _, c := range s {
			v = v*16 + strings.IndexRune("0123456789abcdef", c)
		}
		b[i] = byte(v)
	}
	a := netip.MustParseAddr("fe80::" +
		hex2(b[0]^2, b[1]) + ":" + hex2(b[2], 0xff) + ":" + hex2(0xfe, b[3]) + ":" + hex2(b[4], b[5]))
	return a.String()
}

func hex2(x, y byte) string {
	const d = "0123456789abcdef"
	return string([]byte{d[x>>4], d[x&15], d[y>>4], d[y&15]})
}

func TestUpRefuses(t *testing.T) {
	t.Run("existing namespace", func(t *testing.T) {
		name := newLabName(t)
		theirs := NetnsName(name, "r")
		if err := nsutil.Create(theirs); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nsutil.Delete(theirs) })
		_, err := Up(threeNodes(name))
		if !errors.Is(err, ErrExists) {
			t.Fatalf("Up = %v, want ErrExists", err)
		}
		if !nsutil.Exists(theirs) {
			t.Errorf("Up deleted the pre-existing namespace %s", theirs)
		}
		if _, err := Get(name); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get after refused Up = %v, want ErrNotFound", err)
		}
		for _, n := range []string{"h1", "h2"} {
			if nsutil.Exists(NetnsName(name, n)) {
				t.Errorf("refused Up created %s", NetnsName(name, n))
			}
		}
	})
	t.Run("existing lab", func(t *testing.T) {
		name := newLabName(t)
		if _, err := Up(threeNodes(name)); err != nil {
			t.Fatal(err)
		}
		// Same lab name, other node names: only the state file collides.
		topo := threeNodes(name)
		topo.Nodes = []Node{{Name: "x"}}
		topo.Links = nil
		if _, err := Up(topo); !errors.Is(err, ErrExists) {
			t.Fatalf("second Up = %v, want ErrExists", err)
		}
		if nsutil.Exists(NetnsName(name, "x")) {
			t.Error("refused Up created a namespace")
		}
		l, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range l.Nodes {
			if !nsutil.Exists(ns) {
				t.Errorf("refused Up damaged the existing lab: %s gone", ns)
			}
		}
	})
}

func TestUpRollback(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Topology)
	}{
		// "lo" passes validation but exists in every namespace: the kernel
		// refuses the second veth after the first link is fully set up.
		{"second link fails", func(t *Topology) { t.Links[1].B.Iface = "lo" }},
		// User sysctls are applied last, after every link exists.
		{"last step fails", func(t *Topology) {
			t.Nodes[2].Sysctls = map[string]string{"net.ipv6.conf.all.no_such_setting": "1"}
		}},
		// The same address twice on one interface fails in the address step.
		{"address fails", func(t *Topology) {
			t.Links[1].A.Addrs = append(t.Links[1].A.Addrs, t.Links[1].A.Addrs[0])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := newLabName(t)
			topo := threeNodes(name)
			tt.modify(&topo)
			if _, err := Up(topo); err == nil {
				t.Fatal("Up succeeded, want an error")
			} else {
				t.Logf("Up error (expected): %v", err)
			}
			out := testutil.Exec(t, "", "ip", "netns", "list")
			if strings.Contains(out, "sc-"+name+"-") {
				t.Errorf("namespaces left after failed Up:\n%s", out)
			}
			if _, err := os.Stat(statePath(name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state file left after failed Up: %v", err)
			}
		})
	}
}

// TestUpReadySingleLink checks a one-link lab is usable the moment Up
// returns. The kernel can report the peer end NO-CARRIER for a while after
// both ends are up (seen for over a second); Up waits for oper-up and the
// link-local address. The race is timing-dependent, so this test catches a
// regression only when the kernel happens to be slow.
func TestUpReadySingleLink(t *testing.T) {
	name := newLabName(t)
	p := netip.MustParsePrefix
	l, err := Up(Topology{
		Name:  name,
		Nodes: []Node{{Name: "a"}, {Name: "b"}},
		Links: []Link{{
			A: Endpoint{Node: "a", Iface: "veth0", Addrs: []netip.Prefix{p("fc00:ab::1/64")}},
			B: Endpoint{Node: "b", Iface: "veth0", Addrs: []netip.Prefix{p("fc00:ab::2/64")}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"a", "b"} {
		var links []struct {
			OperState string `json:"operstate"`
		}
		ipJSON(t, l.Nodes[node], &links, "link", "show", "dev", "veth0")
		if len(links) != 1 || links[0].OperState != "UP" {
			t.Errorf("%s veth0 right after Up: operstate %+v, want UP", node, links)
		}
	}
}

// TestDownAfterCrash simulates an Up killed midway: the state file records
// one created namespace; another namespace carrying a name of the lab was
// never recorded (someone else's). Down removes only the recorded one.
func TestDownAfterCrash(t *testing.T) {
	name := newLabName(t)
	mine, theirs := NetnsName(name, "a"), NetnsName(name, "b")
	for _, ns := range []string{mine, theirs} {
		if err := nsutil.Create(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nsutil.Delete(ns) })
	}
	l := &Lab{
		Name:       name,
		Nodes:      map[string]string{"a": mine, "b": theirs, "c": NetnsName(name, "c")},
		Namespaces: []string{mine, NetnsName(name, "c")}, // c: recorded, never created
	}
	if err := l.create(); err != nil {
		t.Fatal(err)
	}
	labs, err := List()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range labs {
		if x.Name == name && x.Complete {
			t.Error("crashed lab listed as complete")
		}
	}
	if err := Down(name); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if nsutil.Exists(mine) {
		t.Errorf("%s (recorded) survived Down", mine)
	}
	if !nsutil.Exists(theirs) {
		t.Errorf("%s (not recorded) was deleted by Down", theirs)
	}
	if _, err := Get(name); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Down = %v, want ErrNotFound", err)
	}
}

// TestUpConcurrent starts the same lab twice at once: exactly one Up wins,
// the other reports ErrExists and leaves the winner's lab intact.
func TestUpConcurrent(t *testing.T) {
	name := newLabName(t)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := Up(threeNodes(name))
			errs <- err
		}()
	}
	var ok, exists int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, ErrExists):
			exists++
		default:
			t.Errorf("Up: %v", err)
		}
	}
	if ok != 1 || exists != 1 {
		t.Fatalf("concurrent Up: %d succeeded, %d ErrExists; want 1 and 1", ok, exists)
	}
	l, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Complete {
		t.Error("winning lab not complete")
	}
	for _, ns := range l.Nodes {
		if !nsutil.Exists(ns) {
			t.Errorf("winner's namespace %s is gone", ns)
		}
	}
	if err := testutil.Ping(l.Nodes["h1"], netip.MustParseAddr("fc00:1::2"), 5*time.Second); err != nil {
		t.Errorf("winner's lab broken: %v", err)
	}
}
