package datapath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/testutil"
)

// TestIngressAgreesWithKernelRules: pool_in's classifier against the
// kernel's own rule lookup, the oracle. The same frames go through a
// namespace that holds the chains' rules as `ip -6 rule`s (each into a
// table that leaves by its own interface) and through pool_in holding
// them as its classifier; for every frame, the chain whose table the
// kernel routed it by must be the chain whose table pool_in marked it
// for (none for none). Extension headers and fragments are where the two
// can part: the kernel dissects them (fib6_rules_early_flow_dissect).
func TestIngressAgreesWithKernelRules(t *testing.T) {
	h, ns, ifx := openTest(t)
	p := testPool(pool.Failover)
	web := chainSel(1111, 3000, "fc00:4d::/48", p, false)
	web.Rule.IPProto, web.Rule.Sport, web.Rule.Dport = 17, nodestate.PortRange{From: 1000, To: 2000}, nodestate.PortRange{From: 50, To: 90}
	udp6 := chainSel(1888, 3001, "fc00:50::/64", p, false)
	udp6.Rule.IPProto = 17
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	if err := h.ProgramRules([]pool.Spec{{Pool: p, Chains: []pool.ChainSel{web, udp6}}}); err != nil {
		t.Fatal(err)
	}

	k := testutil.NewNetns(t, "sct-poolk-")
	sh := func(cmd string) { testutil.Exec(t, k, "sh", "-ec", cmd) }
	sh(fmt.Sprintf(`sysctl -qw net.ipv6.conf.all.forwarding=1
ip link add vin address %s type veth peer name vinp
for o in o1 o2 o3; do ip link add $o type veth peer name ${o}p; done
for d in vin vinp o1 o1p o2 o2p o3 o3p; do ip link set $d up; done
for o in o1 o2 o3; do ip -6 neigh add fe80::1 lladdr 02:00:00:00:00:01 dev $o nud permanent; done
ip -6 route add fc00::/8 via fe80::1 dev o3
ip -6 route add default via fe80::1 dev o1 table 1111
ip -6 route add default via fe80::1 dev o2 table 1888
ip -6 rule add pref 3000 from fc00:1::/64 to fc00:4d::/48 ipproto udp sport 1000-2000 dport 50-90 lookup 1111
ip -6 rule add pref 3001 to fc00:50::/64 ipproto udp lookup 1888
nft add table inet oracle
nft add chain inet oracle post '{ type filter hook postrouting priority 0; }'
for o in o1 o2 o3; do nft add rule inet oracle post oifname $o ip6 saddr fc00:1::5 counter; done`, mac))
	tableOf := map[string]int{"o1": 1111, "o2": 1888, "o3": 0}

	a := netip.MustParseAddr
	webf := pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4d::9"), Sport: 1500, Dport: 85, Proto: 17}
	udpf := pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:50::9"), Sport: 7, Dport: 9, Proto: 17}
	tcpf := pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:50::9"), Sport: 7, Dport: 9, Proto: 6}
	frames := map[string][]byte{
		"web UDP":                        plain(webf),
		"web UDP, port out of range":     plain(pool.Flow{Src: webf.Src, Dst: webf.Dst, Sport: 1500, Dport: 91, Proto: 17}),
		"TCP to the UDP chain":           plain(tcpf),
		"web behind hop-by-hop + dstopt": withExt(webf, []byte{0, 60}, 0),
		"web behind a routing header":    withExt(webf, []byte{43}, 0),
		"web, first fragment":            withExt(webf, []byte{44}, 1),
		"web, non-first fragment":        withExt(webf, []byte{44}, 0x100),
		"UDP chain, first fragment":      withExt(udpf, []byte{0, 44}, 1),
		"UDP chain, non-first fragment":  withExt(udpf, []byte{44}, 0x100),
		"web behind 16 dstopts":          withExt(webf, bytes.Repeat([]byte{60}, 16), 0),
		"web behind 17 dstopts":          withExt(webf, bytes.Repeat([]byte{60}, 17), 0),
		"UDP chain behind 17 dstopts":    withExt(udpf, bytes.Repeat([]byte{60}, 17), 0),
	}
	for what, f := range frames {
		before := oracleCounts(t, k)
		injectFrame(t, k, "vinp", f)
		var kernel string
		deadline := time.Now().Add(5 * time.Second)
		for kernel == "" && time.Now().Before(deadline) {
			after := oracleCounts(t, k)
			for o := range tableOf {
				if after[o] > before[o] {
					kernel = o
				}
			}
			if kernel == "" {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if kernel == "" {
			t.Errorf("%s: the kernel forwarded it nowhere", what)
			continue
		}
		_, m := runIn(t, ns, h, ifx, f)
		got := 0
		if m != 0 {
			got = int(m>>4) & 0xfffff
		}
		if got != tableOf[kernel] {
			t.Errorf("%s: the kernel routed it by table %d (%s), pool_in marked it for %d (mark %#x)", what, tableOf[kernel], kernel, got, m)
		}
	}
}

// oracleCounts reads the oracle namespace's per-interface nft counters.
func oracleCounts(t *testing.T, ns string) map[string]uint64 {
	t.Helper()
	var out struct {
		Nftables []struct {
			Rule *struct {
				Expr []map[string]json.RawMessage `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	raw := testutil.Exec(t, ns, "nft", "-j", "list", "chain", "inet", "oracle", "post")
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("nft -j: %v: %s", err, raw)
	}
	n := map[string]uint64{}
	for _, o := range out.Nftables {
		if o.Rule == nil {
			continue
		}
		var dev string
		var pkts uint64
		for _, e := range o.Rule.Expr {
			if m, ok := e["match"]; ok {
				var x struct {
					Right any `json:"right"`
				}
				_ = json.Unmarshal(m, &x)
				if s, ok := x.Right.(string); ok && strings.HasPrefix(s, "o") {
					dev = s
				}
			}
			if c, ok := e["counter"]; ok {
				var x struct {
					Packets uint64 `json:"packets"`
				}
				_ = json.Unmarshal(c, &x)
				pkts = x.Packets
			}
		}
		if dev != "" {
			n[dev] = pkts
		}
	}
	return n
}

// injectFrame sends frame out of dev in ns (an AF_PACKET socket): its
// veth peer receives it as from a wire.
func injectFrame(t *testing.T, ns, dev string, frame []byte) {
	t.Helper()
	err := nsutil.Do(ns, func() error {
		i, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: i.Index, Halen: 6})
	})
	if err != nil {
		t.Fatalf("inject into %s: %v", dev, err)
	}
}
