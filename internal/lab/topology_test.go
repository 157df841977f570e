package lab

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
)

func TestValidate(t *testing.T) {
	p := netip.MustParsePrefix
	good := func() Topology {
		return Topology{
			Name:  "t1",
			Nodes: []Node{{Name: "A"}, {Name: "B", Router: true}},
			Links: []Link{{
				A: Endpoint{Node: "A", Iface: "eth0", Addrs: []netip.Prefix{p("fc00:12::1/64")}},
				B: Endpoint{Node: "B", Iface: "eth0", Addrs: []netip.Prefix{p("fc00:12::2/64")}},
			}},
		}
	}
	tests := []struct {
		name   string
		modify func(*Topology)
		want   []string // error lines, in order; nil means valid
	}{
		{"valid", func(*Topology) {}, nil},
		{"default name", func(t *Topology) { t.Name = "" }, nil},
		{"bad lab name", func(t *Topology) { t.Name = "Upper" }, []string{
			`name: lab name "Upper" must match [a-z0-9-]{1,16}`}},
		{"long lab name", func(t *Topology) { t.Name = strings.Repeat("a", 17) }, []string{
			`name: lab name "aaaaaaaaaaaaaaaaa" must match [a-z0-9-]{1,16}`}},
		{"dup node and bad node", func(t *Topology) {
			t.Nodes = append(t.Nodes, Node{Name: "A"}, Node{Name: "x/y"})
		}, []string{
			`nodes[2].name: duplicate node "A"`,
			`nodes[3].name: node name "x/y" must match [A-Za-z0-9][A-Za-z0-9_.-]{0,31}`}},
		{"unknown node, bad iface, dup iface", func(t *Topology) {
			t.Links = append(t.Links, Link{
				A: Endpoint{Node: "C", Iface: "averyveryverylongname"},
				B: Endpoint{Node: "B", Iface: "eth0"},
			})
		}, []string{
			`links[1].a.node: unknown node "C"`,
			`links[1].a.iface: invalid interface name "averyveryverylongname" (1-15 chars, no '/', ':' or spaces)`,
			`links[1].b.iface: duplicate interface B:eth0`}},
		{"sysctl outside net", func(t *Topology) {
			t.Nodes[0].Sysctls = map[string]string{"kernel.panic": "1"}
		}, []string{`nodes[0].sysctls: sysctl "kernel.panic": only net.* settings are allowed`}},
		{"invalid prefix", func(t *Topology) {
			t.Links[0].A.Addrs = append(t.Links[0].A.Addrs, netip.Prefix{})
		}, []string{`links[0].a.addrs[1]: invalid prefix`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := good()
			tt.modify(&topo)
			var got []string
			if err := topo.Validate(); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSysctlPath(t *testing.T) {
	tests := []struct{ key, want string }{
		{"net.ipv6.conf.all.forwarding", "/proc/sys/net/ipv6/conf/all/forwarding"},
		{"net/ipv6/conf/eth0.1/seg6_enabled", "/proc/sys/net/ipv6/conf/eth0.1/seg6_enabled"},
		{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv4/ip_forward"},
		{"net/../kernel/panic", ""},
		{"vm.swappiness", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := sysctlPath(tt.key)
			if (err != nil) != (tt.want == "") || got != tt.want {
				t.Errorf("sysctlPath(%q) = %q, %v; want %q", tt.key, got, err, tt.want)
			}
		})
	}
}

func TestLinkLocal(t *testing.T) {
	// RFC 4291 appendix A: 00:1b:21:aa:bb:cc -> fe80::21b:21ff:feaa:bbcc.
	mac := []byte{0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc}
	if got, want := linkLocal(mac), netip.MustParseAddr("fe80::21b:21ff:feaa:bbcc"); got != want {
		t.Errorf("linkLocal(%x) = %s, want %s", mac, got, want)
	}
}

func TestFromDomain(t *testing.T) {
	p := netip.MustParsePrefix
	d := &config.Domain{
		Nodes: map[string]*config.Node{
			"S":  {Role: config.RoleHost, ID: 1},
			"R1": {Role: config.RoleRouter, ID: 2, Sysctls: map[string]string{"net.ipv6.conf.eth1.seg6_require_hmac": "1"}},
			"D":  {Role: config.RoleHost, ID: 3},
		},
		Links: []*config.Link{
			{Endpoints: []string{"S:eth0", "R1:eth0"}, IPv6: "fc00:12::/64", IPv4: "10.0.12.0/24"},
			{Endpoints: []string{"R1:eth1", "D:eth0"}, IPv6: "fc00:23::/64"},
		},
	}
	want := Topology{
		Nodes: []Node{
			{Name: "D"},
			{Name: "R1", Router: true, Sysctls: map[string]string{"net.ipv6.conf.eth1.seg6_require_hmac": "1"}},
			{Name: "S"},
		},
		Links: []Link{
			{
				A: Endpoint{Node: "S", Iface: "eth0", Addrs: []netip.Prefix{p("fc00:12::1/64"), p("10.0.12.1/24")}},
				B: Endpoint{Node: "R1", Iface: "eth0", Addrs: []netip.Prefix{p("fc00:12::2/64"), p("10.0.12.2/24")}},
			},
			{
				A: Endpoint{Node: "R1", Iface: "eth1", Addrs: []netip.Prefix{p("fc00:23::2/64")}},
				B: Endpoint{Node: "D", Iface: "eth0", Addrs: []netip.Prefix{p("fc00:23::3/64")}},
			},
		},
	}
	got, err := FromDomain(d)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("FromDomain (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("FromDomain result does not validate: %v", err)
	}

	t.Run("errors", func(t *testing.T) {
		bad := &config.Domain{
			Nodes: map[string]*config.Node{"A": {ID: 1}, "B": {ID: 300}},
			Links: []*config.Link{
				{Endpoints: []string{"A:eth0"}},
				{Endpoints: []string{"A:eth1", "C:eth0"}},
				{Endpoints: []string{"A:eth2", "B:eth0"}, IPv4: "10.0.0.0/24"},
				{Endpoints: []string{"A-eth3", "B:eth1"}, IPv6: "fc00::/64"},
			},
		}
		_, err := FromDomain(bad)
		var got []string
		if err != nil {
			got = strings.Split(err.Error(), "\n")
		}
		want := []string{
			"lab from domain: links[0].endpoints: want two node:iface endpoints of known nodes",
			"links[1].endpoints: want two node:iface endpoints of known nodes",
			"links[2]: B:eth0: 0 of 1 addresses derivable (bad prefix, or node id 300 does not fit it)",
			"links[3].endpoints: want two node:iface endpoints of known nodes",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("FromDomain errors (-want +got):\n%s", diff)
		}
	})
}
