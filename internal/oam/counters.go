package oam

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/nsutil"
)

// counters is every counter of interest: node → name → value.
type counters map[string]map[string]uint64

// snapshot reads the per-SID counters (through the agents) and each
// node's kernel IP statistics (/proc/net/snmp6 and snmp: where the
// kernel counts what it drops outside any SID, e.g. a missing route).
func snapshot(ctx context.Context, d Domain) (counters, error) {
	c := counters{}
	if d.Remote != nil {
		var nodes []string
		for _, n := range sortedKeys(d.Config.Nodes) {
			if d.Remote.Has(n) {
				nodes = append(nodes, n)
			}
		}
		st, err := d.Remote.Stats(ctx, nodes)
		if err != nil {
			return nil, fmt.Errorf("read IP statistics through the agents: %w", err)
		}
		for n, m := range st {
			c[n] = m
		}
	}
	for node, ns := range d.Netns {
		if d.Remote != nil && d.Remote.Has(node) {
			continue
		}
		m := map[string]uint64{}
		if err := nsutil.Do(ns, func() error { return readSNMP(m) }); err != nil {
			return nil, fmt.Errorf("node %s: read IP statistics: %w", node, err)
		}
		c[node] = m
	}
	if d.Counters == nil {
		return c, nil
	}
	sids, err := d.Counters(ctx)
	if err != nil {
		return nil, fmt.Errorf("read per-SID counters: %w", err)
	}
	for node, list := range sids {
		if c[node] == nil {
			c[node] = map[string]uint64{}
		}
		for _, s := range list {
			// The SID's address, as the plan's hops name it.
			k := "SID " + s.SID.Addr().String() + " "
			c[node][k+"packets"] = s.Packets
			c[node][k+"errors"] = s.Errors
			for name, v := range s.Detail {
				c[node][k+name] = v
			}
		}
	}
	return c, nil
}

// readSNMP reads the calling thread's namespace's IPv6 and IPv4
// statistics (thread-self: nsutil.Do moves only this thread).
func readSNMP(m map[string]uint64) error {
	f, err := os.Open("/proc/thread-self/net/snmp6")
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 2 {
			if v, err := strconv.ParseUint(fs[1], 10, 64); err == nil {
				m[fs[0]] = v
			}
		}
	}
	f.Close()
	b, err := os.ReadFile("/proc/thread-self/net/snmp")
	if err != nil {
		return err
	}
	// Pairs of lines: "Ip: Forwarding DefaultTTL ..." then the values.
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		ks, vs := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(ks) != len(vs) || len(ks) == 0 || ks[0] != "Ip:" {
			continue
		}
		for j := 1; j < len(ks); j++ {
			if v, err := strconv.ParseUint(vs[j], 10, 64); err == nil {
				m["Ip"+ks[j]] = v
			}
		}
	}
	return nil
}

// diff returns the counters that went up, by node and name.
func diff(a, b counters) []Delta {
	var out []Delta
	for node, m := range b {
		for k, v := range m {
			if old := a[node][k]; v > old {
				out = append(out, Delta{Node: node, Counter: k, Delta: v - old})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Counter < out[j].Counter
	})
	return out
}

// dropCounters are the kernel statistics that count a packet not
// forwarded: no route, discarded, header or address errors.
var dropCounters = map[string]bool{
	"Ip6InNoRoutes": true, "Ip6OutNoRoutes": true, "Ip6InDiscards": true, "Ip6OutDiscards": true,
	"Ip6InHdrErrors": true, "Ip6InAddrErrors": true, "Ip6InTooBigErrors": true,
	"Ip6InTruncatedPkts": true, "Ip6FragFails": true,
	"IpInHdrErrors": true, "IpInAddrErrors": true, "IpInDiscards": true,
	"IpOutDiscards": true, "IpOutNoRoutes": true, "IpFragFails": true,
}

// isDrop: a counter that says a packet was dropped (a SID's errors or
// drop-<reason>, a kernel drop statistic).
func isDrop(name string) bool {
	if strings.HasPrefix(name, "SID ") {
		f := name[strings.LastIndexByte(name, ' ')+1:]
		return f == "errors" || strings.Contains(f, "drop") || f == "not-returned"
	}
	return dropCounters[name]
}

// macs returns the MAC addresses of the two ends of a link.
func macs(ns1, if1, ns2, if2 string) (a, b net.HardwareAddr, err error) {
	get := func(ns, ifn string) (net.HardwareAddr, error) {
		var hw net.HardwareAddr
		err := nsutil.Do(ns, func() error {
			ifc, err := net.InterfaceByName(ifn)
			if err != nil {
				return err
			}
			hw = ifc.HardwareAddr
			return nil
		})
		return hw, err
	}
	if a, err = get(ns1, if1); err != nil {
		return nil, nil, fmt.Errorf("interface %s: %w", if1, err)
	}
	if b, err = get(ns2, if2); err != nil {
		return nil, nil, fmt.Errorf("interface %s: %w", if2, err)
	}
	return a, b, nil
}
