package proxy_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/testutil"
)

// Packets are sent with scapy through kernel raw sockets (the kernel does
// neighbour discovery and the edge's seg6 encapsulation).
const (
	rawSockets  = "conf.L3socket6=L3RawSocket6\n"
	rawSockets4 = "conf.L3socket=L3RawSocket\n"
)

func addProxy(t *testing.T, ns, line string) {
	t.Helper()
	f := strings.Fields(line)
	if err := (srunaware.Extension{}).Add(ns, netip.MustParsePrefix(f[0]+"/128"), f[1], f[2:]); err != nil {
		t.Fatalf("sid add %s: %v", line, err)
	}
}

func status(t *testing.T, ns string, sid string) srunaware.Status {
	t.Helper()
	n, err := srunaware.Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	sts, err := n.Show()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if s.Spec.SID.Addr() == netip.MustParseAddr(sid) {
			return s
		}
	}
	t.Fatalf("sid %s not shown: %+v", sid, sts)
	return srunaware.Status{}
}

func nftCounter(t *testing.T, ns, table, family, chain string) string {
	t.Helper()
	return testutil.Exec(t, ns, "nft", "list", "chain", family, table, chain)
}

func count(lines []string, sub string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// End.AD6 in front of an nftables firewall that drops one flow: the other
// flow continues along the chain with its SRv6 headers restored.
func TestDynamicProxyFirewall(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "nft")
	tp := newTopo(t)
	rules := `table inet fw {
	chain flt {
		type filter hook forward priority 0; policy accept;
		udp dport 2000 counter drop
		udp dport 1000 counter accept
	}
}`
	writeAndLoadNft(t, tp.sf, rules)
	addProxy(t, tp.nfv, "fc00:2::ad End.AD6 nh6 fc00:5f::2 oif sf0 iif sf0")
	testutil.Exec(t, tp.edge, "ip", "-6", "route", "add", "fc00:5::/64", "encap", "seg6", "mode", "encap",
		"segs", "fc00:2::ad,fc00:4::d6", "dev", "n0")

	atSF := startCapture(t, tp.sf, "p0", "udp or ip6")
	towardsEg := startCapture(t, tp.eg, "n0", "ip6 proto 43") // SRv6 only: ND/MLD noise would end the settle wait early
	atSrv := startCapture(t, tp.srv, "e0", "udp")
	scapy(t, tp.cl, rawSockets+`
for port in (1000, 2000):
    send(IPv6(src="fc00:c::2", dst="fc00:5::2")/UDP(sport=5555, dport=port)/Raw(b"segchain"), count=5)
`)
	// Inside the SF: plain IPv6/UDP, no routing header, both flows.
	sf := atSF.fields("udp", "ipv6.src", "ipv6.dst", "udp.dstport", "ipv6.routing.segleft")
	if got := count(sf, "fc00:c::2|fc00:5::2|1000|"); got != 5 {
		t.Errorf("SF saw %d plain packets of flow 1000, want 5:\n%s", got, strings.Join(sf, "\n"))
	}
	if got := count(sf, "fc00:c::2|fc00:5::2|2000|"); got != 5 {
		t.Errorf("SF saw %d plain packets of flow 2000, want 5", got)
	}
	// Leaving the NFV node: End applied (SL 1 -> 0, DA = next SID, outer
	// hop limit 63 -> 62; the edge copied the inner's 63), inner intact.
	eg := towardsEg.fields("udp && ipv6.routing", "ipv6.src", "ipv6.dst", "ipv6.hlim", "ipv6.routing.segleft", "udp.dstport")
	if got := count(eg, "fc00:1::1,fc00:c::2|fc00:4::d6,fc00:5::2|62,63|0|1000"); got != 5 {
		t.Errorf("towards egress: %d re-encapsulated packets of flow 1000, want 5:\n%s", got, strings.Join(eg, "\n"))
	}
	if got := count(eg, "|2000"); got != 0 {
		t.Errorf("flow 2000 passed the firewall %d times", got)
	}
	srv := atSrv.fields("udp", "udp.dstport")
	if count(srv, "1000") != 5 || count(srv, "2000") != 0 {
		t.Errorf("server got %v, want 5 x port 1000 only", srv)
	}
	if out := nftCounter(t, tp.sf, "fw", "inet", "flt"); !strings.Contains(out, "udp dport 2000 counter packets 5") {
		t.Errorf("firewall counter:\n%s", out)
	}
	st := status(t, tp.nfv, "fc00:2::ad")
	if st.Counters.InPackets != 10 || st.Counters.OutPackets != 5 || len(st.Cache) != 1 {
		t.Errorf("proxy status %+v", st)
	}
	if len(st.Cache) == 1 && (st.Cache[0].Header.DA != netip.MustParseAddr("fc00:4::d6") || st.Cache[0].Header.SL != 0) {
		t.Errorf("cache %+v", st.Cache[0].Header)
	}
}

func writeAndLoadNft(t *testing.T, ns, rules string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "rules.nft")
	if err := os.WriteFile(f, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, ns, "nft", "-f", f)
}

// End.AS (inner IPv4) in front of a NAT: the SF rewrites the source and
// the configured CACHE carries the packet on along the chain.
func TestStaticProxyNAT(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "nft")
	tp := newTopo(t)
	writeAndLoadNft(t, tp.sf, `table ip nat {
	chain post {
		type nat hook postrouting priority 100; policy accept;
		ip daddr 10.5.0.0/24 counter snat to 10.95.0.2
	}
}`)
	addProxy(t, tp.nfv, "fc00:2::a5 End.AS inner ipv4 nh4 10.95.0.2 oif sf0 iif sf0 src fc00:2::5 segs fc00:4::d4 tag 77")
	testutil.Exec(t, tp.edge, "ip", "route", "add", "10.5.0.0/24", "encap", "seg6", "mode", "encap",
		"segs", "fc00:2::a5", "dev", "n0")
	towardsEg := startCapture(t, tp.eg, "n0", "ip6 proto 43")
	atSrv := startCapture(t, tp.srv, "e0", "udp")
	scapy(t, tp.cl, rawSockets4+`
send(IP(src="10.1.0.2", dst="10.5.0.2")/UDP(sport=4444, dport=3000)/Raw(b"nat me"), count=3)
`)
	eg := towardsEg.fields("ipv6.routing", "ipv6.src", "ipv6.dst", "ipv6.routing.srh.tag", "ipv6.routing.segleft", "ip.src", "ip.dst", "udp.dstport")
	if got := count(eg, "fc00:2::5|fc00:4::d4|004d|0|10.95.0.2|10.5.0.2|3000"); got != 3 {
		t.Errorf("towards egress: %d NATed packets in the configured encapsulation, want 3:\n%s", got, strings.Join(eg, "\n"))
	}
	srv := atSrv.fields("udp", "ip.src", "udp.dstport")
	if count(srv, "10.95.0.2|3000") != 3 {
		t.Errorf("server got %v, want 3 packets from the NAT address", srv)
	}
	st := status(t, tp.nfv, "fc00:2::a5")
	if st.Counters.InPackets != 3 || st.Counters.OutPackets != 3 {
		t.Errorf("proxy counters %+v", st.Counters)
	}
}

// End.AS in front of nginx, which terminates the client's TCP connection:
// the SF's own packets (SYN-ACK, data) get the configured CACHE back to the
// client's edge.
func TestStaticProxyHTTP(t *testing.T) {
	testutil.RequireTool(t, "nginx")
	testutil.RequireTool(t, "curl")
	tp := newTopo(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	// Bigger than one segment: full-size segments no longer fit once
	// re-encapsulated, so the SF must learn the path MTU from the proxy's
	// Packet Too Big before the transfer completes.
	body := "segchain-sf-ok " + strings.Repeat("0123456789", 600)
	if err := os.MkdirAll(filepath.Join(dir, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "www", "index.html"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`pid %s/nginx.pid;
error_log %s/error.log;
events { worker_connections 64; }
http {
	access_log %s/access.log;
	client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s; uwsgi_temp_path %s; scgi_temp_path %s;
	server { listen [fc00:80::80]:8080; root %s/www; }
}
`, dir, dir, dir, dir, dir, dir, dir, dir, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, tp.sf, "ip", "addr", "add", "fc00:80::80/128", "dev", "lo")
	bg(t, tp.sf, "nginx", "-c", conf, "-g", "daemon off; master_process off;")
	addProxy(t, tp.nfv, "fc00:2::a6 End.AS inner ipv6 nh6 fc00:5f::2 oif sf0 iif sf0 src fc00:2::6 segs fc00:1::d6")
	testutil.Exec(t, tp.edge, "ip", "-6", "route", "add", "fc00:80::/64", "encap", "seg6", "mode", "encap",
		"segs", "fc00:2::a6", "dev", "n0")
	back := startCaptureAll(t, tp.edge, "n0", "ip6")
	var out string
	var err error
	i := 0
	for ; i < 20; i++ { // nginx may still be starting
		out, err = testutil.ExecErr(tp.cl, "curl", "-sS", "-g", "--max-time", "3", "http://[fc00:80::80]:8080/")
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || out != body {
		t.Fatalf("curl through End.AS: %v: got %d bytes, want %d", err, len(out), len(body))
	}
	// The SF's replies left the NFV node in the configured encapsulation.
	lines := back.fields("ipv6.routing", "ipv6.src", "ipv6.dst", "ipv6.routing.segleft", "tcp.srcport")
	if count(lines, "fc00:2::6,fc00:80::80|fc00:1::d6,fc00:c::2|0|8080") == 0 {
		t.Errorf("no encapsulated reply from the SF towards the edge:\n%s", strings.Join(lines, "\n"))
	}
	st := status(t, tp.nfv, "fc00:2::a6")
	if st.Counters.InPackets == 0 || st.Counters.OutPackets == 0 || st.Counters.ICMPErrors == 0 {
		t.Errorf("proxy counters %+v", st.Counters)
	}
}

// End.AM in front of a pass-through inspector (an nft counter): the SF sees
// the final destination with the SRH kept; de-masquerading restores it.
func TestMasqueradingProxyInspector(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "nft")
	tp := newTopo(t)
	writeAndLoadNft(t, tp.sf, `table ip6 ids {
	chain flt {
		type filter hook forward priority 0; policy accept;
		ip6 daddr fc00:5::2 udp dport 4000 counter
	}
}`)
	testutil.Exec(t, tp.srv, "sysctl", "-qw", "net.ipv6.conf.all.seg6_enabled=1")
	testutil.Exec(t, tp.srv, "sysctl", "-qw", "net.ipv6.conf.e0.seg6_enabled=1")
	addProxy(t, tp.nfv, "fc00:2::a3 end.am ip fc00:5f::2 sf0 sf0") // srconf spelling
	testutil.Exec(t, tp.edge, "ip", "-6", "route", "add", "fc00:5::/64", "encap", "seg6", "mode", "inline",
		"segs", "fc00:2::a3", "dev", "n0")
	atSF := startCapture(t, tp.sf, "p0", "ip6")
	atSrv := startCapture(t, tp.srv, "e0", "ip6")
	scapy(t, tp.cl, rawSockets+`
send(IPv6(src="fc00:c::2", dst="fc00:5::2")/UDP(sport=5, dport=4000)/Raw(b"inspect me"), count=4)
`)
	sf := atSF.fields("udp", "ipv6.dst", "ipv6.routing.segleft", "ipv6.routing.srh.addr")
	if got := count(sf, "fc00:5::2|1|fc00:5::2,fc00:2::a3"); got != 4 {
		t.Errorf("SF saw %d masqueraded packets (DA = final, SRH kept, SL 1), want 4:\n%s", got, strings.Join(sf, "\n"))
	}
	srv := atSrv.fields("udp", "ipv6.dst", "ipv6.routing.segleft", "udp.dstport")
	if got := count(srv, "fc00:5::2|0|4000"); got != 4 {
		t.Errorf("server got %d de-masqueraded packets, want 4:\n%s", got, strings.Join(srv, "\n"))
	}
	if out := nftCounter(t, tp.sf, "ids", "ip6", "flt"); !strings.Contains(out, "counter packets 4") {
		t.Errorf("inspector counter:\n%s", out)
	}
	st := status(t, tp.nfv, "fc00:2::a3")
	if st.Counters.InPackets != 4 || st.Counters.OutPackets != 4 {
		t.Errorf("proxy counters %+v", st.Counters)
	}
}
