package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

func TestPrivilegedHMACKeys(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "dph")
	h := openT(t, ns)
	f := h.Probe()
	checkProbe(t, f.HMAC)
	if !f.HMAC.Supported {
		t.Skipf("seg6 hmac: %s", f.HMAC.Reason)
	}
	keys := []nodestate.HMACKey{
		{ID: 1, Alg: "sha1", Secret: []byte("first secret")},
		{ID: 77, Alg: "sha256", Secret: bytes.Repeat([]byte{0xab}, 64)},
		{ID: 1000, Alg: "sha256", Secret: []byte("x")},
	}
	for _, k := range keys {
		if err := h.SetHMACKey(k); err != nil {
			t.Fatal(err)
		}
	}
	got, err := h.HMACKeys()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(keys, got); diff != "" {
		t.Errorf("HMACKeys (-want +got):\n%s", diff)
	}
	// Oracle: iproute2 lists the same ids and algorithms.
	out := testutil.Exec(t, ns, "ip", "sr", "hmac", "show")
	for _, k := range keys {
		if !strings.Contains(out, "hmac "+strconv.FormatUint(uint64(k.ID), 10)+" ") || !strings.Contains(out, "algo "+k.Alg) {
			t.Errorf("ip sr hmac show lacks key %d (%s):\n%s", k.ID, k.Alg, out)
		}
	}
	// Replace a secret and algorithm in place.
	keys[0] = nodestate.HMACKey{ID: 1, Alg: "sha256", Secret: []byte("rotated")}
	if err := h.SetHMACKey(keys[0]); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteHMACKey(77); err != nil {
		t.Fatal(err)
	}
	want := []nodestate.HMACKey{keys[0], keys[2]}
	if got, err = h.HMACKeys(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after replace+delete (-want +got):\n%s", diff)
	}
	if err := h.DeleteHMACKey(77); !errors.Is(err, unix.ENOENT) {
		t.Errorf("deleting a missing key: %v, want ENOENT", err)
	}
	for _, bad := range []nodestate.HMACKey{{ID: 0, Secret: []byte("a")}, {ID: 2, Alg: "md5", Secret: []byte("a")}, {ID: 3, Alg: "sha1"}, {ID: 4, Alg: "sha1", Secret: make([]byte, 65)}} {
		if err := h.SetHMACKey(bad); err == nil {
			t.Errorf("SetHMACKey(%v) succeeded", bad)
		}
	}
	// Keys are per namespace.
	other := openT(t, testutil.NewNetns(t, "dph2"))
	if ks, err := other.HMACKeys(); err != nil || len(ks) != 0 {
		t.Errorf("fresh namespace has keys %v (%v)", ks, err)
	}
}

func TestPrivilegedTunSrc(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "dpt")
	h := openT(t, ns)
	got, err := h.TunSrc()
	if err != nil {
		t.Fatal(err)
	}
	if got != netip.IPv6Unspecified() {
		t.Errorf("initial tunsrc = %s, want ::", got)
	}
	for _, a := range []string{"fc00:1::1", "2001:db8::5", "::"} {
		if err := h.SetTunSrc(ip(a)); err != nil {
			t.Fatal(err)
		}
		if got, err := h.TunSrc(); err != nil || got != ip(a) {
			t.Errorf("TunSrc() = %s, %v; want %s", got, err, a)
		}
		out := testutil.Exec(t, ns, "ip", "sr", "tunsrc", "show")
		if !strings.Contains(out, "tunsrc addr "+a) {
			t.Errorf("ip sr tunsrc show = %q, want addr %s", out, a)
		}
	}
	if err := h.SetTunSrc(ip("10.0.0.1")); err == nil {
		t.Error("SetTunSrc accepted an IPv4 address")
	}
}

func TestPrivilegedRules(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newRouteNetns(t)
	h := openT(t, ns)
	rules := []nodestate.Rule{
		{Family: 6, Priority: 100, Src: pfx("fc00:a::/64"), Dst: pfx("fc00:d::/64"), IPProto: 6, Dport: nodestate.PortRange{From: 80, To: 80}, Table: 100},
		{Family: 6, Priority: 101, Src: pfx("fc00:a::/64"), IPProto: 17, Sport: nodestate.PortRange{From: 1000, To: 2000}, Dport: nodestate.PortRange{From: 53, To: 53}, Iif: "dp0", Table: 1000},
		{Family: 4, Priority: 200, Src: pfx("10.1.0.0/16"), Dst: pfx("10.2.0.0/16"), IPProto: 6, Dport: nodestate.PortRange{From: 8000, To: 8080}, Table: 101},
		{Family: 4, Priority: 201, Iif: "dp0", Table: 102},
	}
	for _, r := range rules {
		if err := h.AddRule(r); err != nil {
			t.Fatal(err)
		}
	}
	// A foreign rule must be ignored.
	testutil.Exec(t, ns, "ip", "-6", "rule", "add", "priority", "300", "from", "fc00:f::/64", "lookup", "100")
	got, err := h.Rules()
	if err != nil {
		t.Fatal(err)
	}
	nodeSort := func(rs []nodestate.Rule) []nodestate.Rule {
		n := nodestate.Node{Rules: rs}
		n.Sort()
		return n.Rules
	}
	if diff := cmp.Diff(nodeSort(rules), nodeSort(got), cmpOpts); diff != "" {
		t.Errorf("Rules (-want +got):\n%s", diff)
	}
	// Oracle: iproute2 prints the same classifiers, and protocol nodestate.Proto
	// (shown as a number: other tools' files may name it, FRR's calls it
	// "openfabric").
	rule := func(fam, prio, want string) {
		t.Helper()
		named := testutil.Exec(t, ns, "ip", fam, "rule", "show")
		if !strings.Contains(named, prio+":\t"+want+" proto ") {
			t.Errorf("ip %s rule show lacks %q:\n%s", fam, prio+": "+want, named)
		}
		for _, l := range strings.Split(testutil.Exec(t, ns, "ip", "-N", fam, "rule", "show"), "\n") {
			if strings.HasPrefix(l, prio+":") && !strings.HasSuffix(strings.TrimSpace(l), fmt.Sprintf("proto %d", nodestate.Proto)) {
				t.Errorf("rule %s: not protocol %d: %q", prio, nodestate.Proto, l)
			}
		}
	}
	rule("-6", "100", "from fc00:a::/64 to fc00:d::/64 ipproto tcp dport 80 lookup 100")
	rule("-6", "101", "from fc00:a::/64 iif dp0 ipproto udp sport 1000-2000 dport 53 lookup 1000")
	rule("-4", "200", "from 10.1.0.0/16 to 10.2.0.0/16 ipproto tcp dport 8000-8080 lookup 101")
	for _, r := range rules {
		if err := h.DeleteRule(r); err != nil {
			t.Errorf("DeleteRule: %v", err)
		}
	}
	if got, err := h.Rules(); err != nil || len(got) != 0 {
		t.Errorf("after delete: %v %v", got, err)
	}
	if !strings.Contains(testutil.Exec(t, ns, "ip", "-6", "rule", "show"), "300:") {
		t.Error("foreign rule was removed")
	}
	if err := h.AddRule(nodestate.Rule{Family: 5, Table: 1}); err == nil {
		t.Error("AddRule accepted family 5")
	}
}

func TestPrivilegedSysctl(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newRouteNetns(t)
	testutil.Exec(t, ns, "ip", "link", "add", "v.1", "type", "veth", "peer", "name", "v.2")
	h := openT(t, ns)
	for _, c := range []struct{ key, proc, value string }{
		{"net.ipv6.conf.dp0.seg6_enabled", "net.ipv6.conf.dp0.seg6_enabled", "1"},
		{"net.ipv6.conf.v.1.seg6_require_hmac", "net/ipv6/conf/v.1/seg6_require_hmac", "-1"},
		{"net.ipv6.conf.all.forwarding", "net.ipv6.conf.all.forwarding", "1"},
		{"net.ipv4.ip_forward", "net.ipv4.ip_forward", "1"},
	} {
		t.Run(c.key, func(t *testing.T) {
			before, err := h.Sysctl(c.key)
			if err != nil {
				t.Fatal(err)
			}
			if oracle := strings.TrimSpace(testutil.Exec(t, ns, "sysctl", "-n", c.proc)); oracle != before {
				t.Errorf("Sysctl = %q, sysctl(8) = %q", before, oracle)
			}
			if err := h.SetSysctl(c.key, c.value); err != nil {
				t.Fatal(err)
			}
			if oracle := strings.TrimSpace(testutil.Exec(t, ns, "sysctl", "-n", c.proc)); oracle != c.value {
				t.Errorf("after SetSysctl sysctl(8) = %q, want %q", oracle, c.value)
			}
			if got, _ := h.Sysctl(c.key); got != c.value {
				t.Errorf("Sysctl after set = %q, want %q", got, c.value)
			}
		})
	}
	// The write stayed in the namespace: a fresh one still has the default.
	other := openT(t, testutil.NewNetns(t, "dps"))
	if v, err := other.Sysctl("net.ipv6.conf.all.forwarding"); err != nil || v != "0" {
		t.Errorf("other namespace forwarding = %q, %v; want 0", v, err)
	}
	if _, err := h.Sysctl("net.ipv6.conf.nope0.seg6_enabled"); err == nil {
		t.Error("reading a sysctl of a missing interface succeeded")
	}
}
