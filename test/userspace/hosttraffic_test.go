package userspace_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// hostTopo: host A's own stack encapsulates (H.Encaps, seg6 lwt) its
// traffic to B through a service SID on the NFV node; B decapsulates (SL 0
// at a local address) and answers A over a plain encapsulation to A. So
// every packet the service sees left a real socket, with the checksum
// offload state (CHECKSUM_PARTIAL on veth) the kernel gives it.
type hostTopo struct {
	A, NFV, B string
	linkMTU   int
}

const (
	hSID   = "fc00:5::100"
	hDecap = "fc00:9::1" // B's decapsulating address
)

func newHostTopo(t *testing.T, mtu int) *hostTopo {
	t.Helper()
	h := &hostTopo{A: testutil.NewNetns(t, "h7a"), NFV: testutil.NewNetns(t, "h7n"), B: testutil.NewNetns(t, "h7b"), linkMTU: mtu}
	for _, ns := range []string{h.A, h.NFV, h.B} {
		testutil.Exec(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
			"net.ipv6.conf.all.seg6_enabled=1", "net.ipv6.conf.default.seg6_enabled=1", "net.ipv6.conf.all.forwarding=1")
	}
	m := strconv.Itoa(mtu)
	testutil.Exec(t, "", "ip", "link", "add", "a0", "netns", h.A, "mtu", m, "type", "veth", "peer", "name", "n0", "netns", h.NFV, "mtu", m)
	testutil.Exec(t, "", "ip", "link", "add", "n1", "netns", h.NFV, "mtu", m, "type", "veth", "peer", "name", "b0", "netns", h.B, "mtu", m)
	for _, c := range [][]string{{h.A, "a0", "fc00:a::1/64"}, {h.NFV, "n0", "fc00:a::2/64"}, {h.NFV, "n1", "fc00:b::2/64"}, {h.B, "b0", "fc00:b::1/64"}} {
		testutil.Exec(t, c[0], "sysctl", "-qw", "net.ipv6.conf."+c[1]+".seg6_enabled=1")
		testutil.Exec(t, c[0], "ip", "addr", "add", c[2], "dev", c[1], "nodad")
		testutil.Exec(t, c[0], "ip", "link", "set", c[1], "up")
	}
	for _, c := range [][]string{{h.A, "10.0.1.1/32"}, {h.A, "2001:db8:1::1/128"}, {h.B, "10.0.2.2/32"}, {h.B, "2001:db8:2::2/128"}, {h.B, hDecap + "/128"}} {
		args := []string{"ip", "addr", "add", c[1], "dev", "lo"}
		if strings.Contains(c[1], ":") {
			args = append(args, "nodad")
		}
		testutil.Exec(t, c[0], args...)
	}
	testutil.Exec(t, h.A, "ip", "-6", "route", "add", "default", "via", "fc00:a::2")
	testutil.Exec(t, h.B, "ip", "-6", "route", "add", "default", "via", "fc00:b::2")
	testutil.Exec(t, h.NFV, "ip", "-6", "route", "add", "fc00:9::/64", "via", "fc00:b::1")
	// The hosts' inner routes have MTU 1500 (hosts behind ordinary links,
	// SR links larger); 10.0.3.0/24 goes the same way at the link's MTU.
	segs := hSID + "," + hDecap
	testutil.Exec(t, h.A, "ip", "route", "add", "10.0.2.0/24", "encap", "seg6", "mode", "encap", "segs", segs, "dev", "a0", "src", "10.0.1.1", "mtu", "1500")
	testutil.Exec(t, h.A, "ip", "route", "add", "10.0.3.0/24", "encap", "seg6", "mode", "encap", "segs", segs, "dev", "a0", "src", "10.0.1.1")
	testutil.Exec(t, h.A, "ip", "-6", "route", "add", "2001:db8:2::/64", "encap", "seg6", "mode", "encap", "segs", segs, "dev", "a0", "src", "2001:db8:1::1", "mtu", "1500")
	testutil.Exec(t, h.B, "ip", "route", "add", "10.0.1.0/24", "encap", "seg6", "mode", "encap", "segs", "fc00:a::1", "dev", "b0", "src", "10.0.2.2", "mtu", "1500")
	testutil.Exec(t, h.B, "ip", "-6", "route", "add", "2001:db8:1::/64", "encap", "seg6", "mode", "encap", "segs", "fc00:a::1", "dev", "b0", "src", "2001:db8:2::2", "mtu", "1500")
	return h
}

// csumErrors reads B's checksum error counters.
func csumErrors(t *testing.T, ns string) map[string]int {
	t.Helper()
	out := map[string]int{}
	snmp := strings.Split(testutil.Exec(t, ns, "cat", "/proc/net/snmp"), "\n")
	for i := 0; i+1 < len(snmp); i++ {
		h, v := strings.Fields(snmp[i]), strings.Fields(snmp[i+1])
		if len(h) == 0 || len(h) != len(v) || (h[0] != "Udp:" && h[0] != "Tcp:") || h[0] != v[0] {
			continue
		}
		for j := range h {
			if h[j] == "InCsumErrors" {
				out[strings.TrimSuffix(h[0], ":")+"InCsumErrors"], _ = strconv.Atoi(v[j])
			}
		}
	}
	for _, l := range strings.Split(testutil.Exec(t, ns, "cat", "/proc/net/snmp6"), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Udp6InCsumErrors" {
			out[f[0]], _ = strconv.Atoi(f[1])
		}
	}
	return out
}

// servers starts, in B, a UDP sink and an HTTP server (GET: 200 kB;
// POST: answers the body's length).
func (h *hostTopo) servers(t *testing.T) (udp chan string) {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	err := nsutil.Do(h.B, func() (err error) {
		if pc, err = net.ListenPacket("udp", "[::]:7777"); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", "[::]:8080")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	udp = make(chan string, 64)
	go func() {
		b := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			udp <- string(b[:n])
		}
	}()
	body := strings.Repeat("0123456789abcdef", 200_000/16)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, n)
			return
		}
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { pc.Close(); srv.Close() })
	return udp
}

// traffic sends UDP datagrams and runs curl (GET 200 kB and POST 200 kB)
// from A's stack to B over IPv4 and IPv6 inner packets.
func (h *hostTopo) traffic(t *testing.T, udp chan string) {
	t.Helper()
	before := csumErrors(t, h.B)
	upload := filepath.Join(t.TempDir(), "upload")
	if err := os.WriteFile(upload, []byte(strings.Repeat("x", 200_000)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{"10.0.2.2", "2001:db8:2::2"} {
		var c net.Conn
		if err := nsutil.Do(h.A, func() (err error) { c, err = net.Dial("udp", net.JoinHostPort(dst, "7777")); return err }); err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 100, 1400} {
			msg := fmt.Sprintf("%s/%d/%s", dst, size, strings.Repeat("u", size))
			if _, err := c.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-udp:
				if got != msg {
					t.Errorf("UDP to %s: got %.40q, want %.40q", dst, got, msg)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("UDP %d bytes to %s never arrived", size, dst)
			}
		}
		// One send of 4 × 1000 bytes with UDP GSO: a single aggregate skb
		// leaves A (generic XDP at the service sees it whole); 4
		// datagrams must arrive.
		uc := c.(*net.UDPConn)
		rc, err := uc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var serr error
		rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT, 1000) })
		if serr != nil {
			t.Fatalf("UDP_SEGMENT: %v", serr)
		}
		if _, err := c.Write([]byte(strings.Repeat("g", 4000))); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			select {
			case got := <-udp:
				if got != strings.Repeat("g", 1000) {
					t.Errorf("UDP GSO segment %d to %s: %d bytes", i, dst, len(got))
				}
			case <-time.After(5 * time.Second):
				t.Errorf("UDP GSO to %s: segment %d never arrived", dst, i)
			}
		}
		c.Close()
		url := "http://" + net.JoinHostPort(dst, "8080") + "/"
		if out, err := testutil.ExecErr(h.A, "curl", "-sS", "--max-time", "15", "-o", "/dev/null", "-w", "%{size_download}", url); err != nil || strings.TrimSpace(out) != "200000" {
			t.Errorf("curl GET %s: %q, %v", url, out, err)
		}
		if out, err := testutil.ExecErr(h.A, "curl", "-sS", "--max-time", "15", "--data-binary", "@"+upload, url); err != nil || strings.TrimSpace(out) != "200000" {
			t.Errorf("curl POST 200 kB to %s: %q, %v", url, out, err)
		}
		pingArgs := []string{"ping", "-c", "2", "-i", "0.2", "-W", "3", "-s", "1400", dst}
		if out, err := testutil.ExecErr(h.A, pingArgs...); err != nil {
			t.Errorf("ping -s 1400 %s: %v\n%s", dst, err, out)
		}
	}
	after := csumErrors(t, h.B)
	for k, v := range after {
		if v != before[k] {
			t.Errorf("B counted %d %s", v-before[k], k)
		}
	}
}

// TestPrivilegedHostTraffic sends traffic from real host stacks (UDP
// sockets, curl over HTTP, ping -s 1400) through a userspace service of
// every kind (sync, batched, End.ASM), with links where XDP is native
// (MTU 3000) and where it falls back to generic (MTU 9000, above what
// native XDP on veth takes without multi-buffer): everything arrives, B
// counts no checksum error.
func TestPrivilegedHostTraffic(t *testing.T) {
	testutil.RequirePrivileged(t)
	testutil.RequireTool(t, "curl")
	for _, mtu := range []int{3000, 9000} {
		t.Run(fmt.Sprintf("mtu%d", mtu), func(t *testing.T) {
			h := newHostTopo(t, mtu)
			udp := h.servers(t)
			for _, kind := range []string{"sync", "batch", "asm", "bypass"} {
				t.Run(kind, func(t *testing.T) {
					cfg := srv6svc.Config{Name: "h7host", Netns: h.NFV, Interfaces: []string{"n0"},
						SIDs: []netip.Prefix{netip.MustParsePrefix(hSID + "/128")}, Queues: 1}
					if kind == "bypass" {
						cfg.OnFailure = srv6svc.OnFailureBypass
					}
					svc, err := srv6svc.Listen(cfg)
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() {
						switch kind {
						case "bypass": // no process: the kernel's End route
							done <- nil
						case "sync":
							done <- svc.Serve(ctx, func(*srv6svc.Packet) srv6svc.Verdict { return srv6svc.Forward })
						case "batch":
							done <- svc.ServeBatch(ctx, func([]*srv6svc.Packet, []srv6svc.Verdict) {})
						case "asm":
							done <- svc.ServeASM(ctx, func([]byte) srv6svc.InnerVerdict { return srv6svc.Pass })
						}
					}()
					t.Cleanup(func() {
						cancel()
						if err := <-done; err != nil {
							t.Errorf("serve: %v", err)
						}
						if err := svc.Release(); err != nil {
							t.Errorf("release: %v", err)
						}
					})
					wantMode := fmt.Sprintf("xdp=n0:native,s6svc0k:native xsk=copy mtu=%d fwd=fib", mtu)
					if mtu > srv6svc.MaxMTU {
						wantMode = fmt.Sprintf("xdp=n0:generic(mtu%d>3506),s6svc0k:native xsk=copy mtu=3506<%d fwd=fib", mtu, mtu)
					}
					if svc.Mode() != wantMode {
						t.Errorf("mode %q, want %q", svc.Mode(), wantMode)
					}
					if kind == "bypass" {
						if err := svc.Close(); err != nil {
							t.Fatal(err)
						}
					}
					h.traffic(t, udp)
					c := svc.Counters()
					if kind == "bypass" {
						bs, err := srv6svc.Status(h.NFV)
						if err != nil || len(bs) != 1 || bs[0].Counters.NoSocketBypass == 0 {
							t.Errorf("status %+v, %v: want one binding with bypassed packets", bs, err)
						}
					} else if c.RX == 0 || c.TX != c.RX {
						t.Errorf("counters %+v: the service did not forward every packet it got", c)
					}
					if mtu > srv6svc.MaxMTU && kind == "sync" {
						// Longer than the pair takes: dropped, counted.
						_, _ = testutil.ExecErr(h.A, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-s", "5000", "10.0.3.3")
						if got := svc.Counters().TooBig - c.TooBig; got != 3 {
							t.Errorf("too big: %d counted, want 3", got)
						}
					}
					t.Logf("mode %s, counters %+v", svc.Mode(), c)
				})
			}
		})
	}
}
