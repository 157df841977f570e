package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/testutil"
)

// sfRules makes sf1 a real SR-unaware firewall: it counts and accepts
// forwarded TCP to 8080 and drops TCP to 8081. "forwarded" counts every
// forwarded IPv6 packet: under End.AM the SF gets the whole SRv6 packet (of
// an encap chain: outer header, SRH with SL > 0, inner packet), where
// "tcp dport" cannot match.
const sfRules = `table inet sf {
	counter fw8080 {}
	counter forwarded {}
	chain forward {
		type filter hook forward priority 0; policy accept;
		meta nfproto ipv6 counter name forwarded
		tcp dport 8080 counter name fw8080 accept
		tcp dport 8081 counter drop
	}
}
`

var nftPackets = regexp.MustCompile(`packets (\d+)`)

func nftCounter(t *testing.T, ns string) uint64 { return nftNamed(t, ns, "fw8080") }

func nftNamed(t *testing.T, ns, name string) uint64 {
	t.Helper()
	out := testutil.Exec(t, ns, "nft", "list", "counter", "inet", "sf", name)
	m := nftPackets.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no packet count in:\n%s", out)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// proxyPinned reports whether ns has pinned proxy state under
// bpfpin.Root() (ns-<netns inode>-<cookie>/proxy/sids_map).
func proxyPinned(t *testing.T, ns string) bool {
	t.Helper()
	fi, err := os.Stat(filepath.Join("/run/netns", ns))
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	root, err := bpfpin.Root()
	if err != nil {
		t.Fatal(err)
	}
	m, err := filepath.Glob(filepath.Join(root, fmt.Sprintf("ns-%d-*", ino), "proxy", "sids_map"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m) > 0
}

// tcpExchange runs a one-shot TCP echo server on d and connects from s.
func tcpExchange(t *testing.T, e *env, port int) (string, error) {
	t.Helper()
	srv := exec.Command("ip", "netns", "exec", e.NS("d"), "python3", "-c", fmt.Sprintf(`
import socket
s=socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::",%d)); s.listen(4); s.settimeout(8); print("ready", flush=True)
c,_=s.accept(); data=c.recv(100); c.sendall(b"pong:"+data); c.close()
`, port))
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil {
		t.Fatalf("server did not start: %v", err)
	}
	return testutil.ExecErr(e.NS("s"), "python3", "-c", fmt.Sprintf(`
import socket
c=socket.create_connection(("fc00:4d::d",%d),timeout=5); c.sendall(b"hello"); print(c.recv(100).decode())
`, port))
}

func TestProxyDomain(t *testing.T) {
	testutil.RequireTool(t, "nft")
	testutil.RequireTool(t, "python3")
	e := setup(t, "../../examples/default.yaml")
	nfv1 := e.NS("nfv1")
	t.Cleanup(func() { _ = srunaware.Remove(nfv1) }) // if the test fails before destroy
	if res := e.apply(); res.Changes() == 0 {
		t.Fatal("first apply changed nothing")
	}
	rules := filepath.Join(t.TempDir(), "sf.nft")
	if err := os.WriteFile(rules, []byte(sfRules), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, e.NS("sf1"), "nft", "-f", rules)
	fw := e.sid("nfv1-fw")

	t.Run("TCP 8080 goes through the SF behind the proxy", func(t *testing.T) {
		nftBefore := nftCounter(t, e.NS("sf1"))
		pc := e.counters("nfv1", fw)
		if pc.Behavior != srunaware.EndAD || !pc.Owned || !pc.Counted || pc.SID.Bits() != 128 {
			t.Errorf("proxy status = %+v, want an owned, counted End.AD /128", pc)
		}
		out, err := tcpExchange(t, e, 8080)
		if err != nil || strings.TrimSpace(out) != "pong:hello" {
			t.Fatalf("TCP s -> d:8080: %v\n%s", err, out)
		}
		if after := nftCounter(t, e.NS("sf1")); after <= nftBefore {
			t.Errorf("SF firewall counter did not move: %d -> %d", nftBefore, after)
		}
		if after := e.counters("nfv1", fw).Packets; after <= pc.Packets {
			t.Errorf("proxy counter did not move: %d -> %d", pc.Packets, after)
		}
		nfv2 := e.counters("nfv2", e.sid("nfv2-end")).Packets
		if nfv2 == 0 {
			t.Error("nfv2-end, the hop after the proxy, saw no packet")
		}
	})

	t.Run("second apply changes nothing", func(t *testing.T) {
		if res := e.apply(); res.Changes() != 0 {
			t.Errorf("second apply made %d changes: %+v", res.Changes(), res.Diffs)
		}
	})

	t.Run("destroy removes the proxy and its pinned state", func(t *testing.T) {
		if !proxyPinned(t, nfv1) {
			t.Fatal("no pinned proxy state for nfv1 before destroy")
		}
		if _, err := e.ctl.Destroy(context.Background()); err != nil {
			t.Fatal(err)
		}
		if proxyPinned(t, nfv1) {
			t.Error("pinned proxy state left after destroy")
		}
		sts, err := srunaware.Extension{}.Show(nfv1)
		if err != nil || len(sts) != 0 {
			t.Errorf("proxies after destroy: %v, %v", sts, err)
		}
	})
}

// TestProxyDomainProxyTypes switches nfv1-fw of the default domain through
// the other proxy types on one lab: each apply replaces the proxy in place,
// TCP 8080 still crosses the SF, and a second apply changes nothing.
func TestProxyDomainProxyTypes(t *testing.T) {
	testutil.RequireTool(t, "nft")
	testutil.RequireTool(t, "python3")
	const file = "../../examples/default.yaml"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const dynamic = "proxy: dynamic\n    inner: ipv6\n"
	if !strings.Contains(string(src), dynamic) {
		t.Fatalf("%s: nfv1-fw is not %q", file, dynamic)
	}
	e := setup(t, file)
	nfv1 := e.NS("nfv1")
	t.Cleanup(func() { _ = srunaware.Remove(nfv1) })
	e.apply()
	rules := filepath.Join(t.TempDir(), "sf.nft")
	if err := os.WriteFile(rules, []byte(sfRules), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, e.NS("sf1"), "nft", "-f", rules)
	fw := e.sid("nfv1-fw")

	for _, tc := range []struct {
		name, yaml, behavior, counter string
	}{
		{"static", "proxy: static\n    inner: ipv6\n", srunaware.EndAS, "fw8080"},
		{"dynamic-flow", "proxy: dynamic-flow\n    inner: ipv6\n    flow_timeout: 30\n", srunaware.EndAD, "fw8080"},
		{"masquerading", "proxy: masquerading\n", srunaware.EndAM, "forwarded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := config.Parse([]byte(strings.Replace(string(src), dynamic, tc.yaml, 1)), filepath.Dir(file))
			if err != nil {
				t.Fatal(err)
			}
			e.d, e.ctl = d, e.Session(d)
			res := e.apply()
			var ops []string
			for _, df := range res.Diffs {
				for _, op := range df.Ops() {
					ops = append(ops, df.Node+" "+strings.SplitN(op.String(), "\n", 2)[0])
				}
			}
			if diff := cmp.Diff([]string{"nfv1 ~ proxies: 1 -> 1"}, ops); diff != "" {
				t.Errorf("apply ops (-want +got):\n%s", diff)
			}
			if res := e.apply(); res.Changes() != 0 {
				t.Errorf("second apply made %d changes: %+v", res.Changes(), res.Diffs)
			}
			nftBefore := nftNamed(t, e.NS("sf1"), tc.counter)
			pc := e.counters("nfv1", fw)
			if pc.Behavior != tc.behavior {
				t.Errorf("proxy behaviour = %s, want %s", pc.Behavior, tc.behavior)
			}
			if out, err := tcpExchange(t, e, 8080); err != nil || strings.TrimSpace(out) != "pong:hello" {
				t.Fatalf("TCP s -> d:8080: %v\n%s", err, out)
			}
			if after := nftNamed(t, e.NS("sf1"), tc.counter); after <= nftBefore {
				t.Errorf("SF firewall counter %s did not move: %d -> %d", tc.counter, nftBefore, after)
			}
			if after := e.counters("nfv1", fw).Packets; after <= pc.Packets {
				t.Errorf("proxy counter did not move: %d -> %d", pc.Packets, after)
			}
		})
	}
	if _, err := e.ctl.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if proxyPinned(t, nfv1) {
		t.Error("pinned proxy state left after destroy")
	}
}
