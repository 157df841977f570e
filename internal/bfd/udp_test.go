package bfd_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/bfd"
	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

var (
	addrA = netip.MustParseAddr("fc00:bf::1")
	addrB = netip.MustParseAddr("fc00:bf::2")
)

// vethPair makes two fresh namespaces joined by a veth pair, eth0 in
// each, fc00:bf::1/64 in a and fc00:bf::2/64 in b (no DAD).
func vethPair(t *testing.T) (a, b string) {
	t.Helper()
	testutil.RequirePrivileged(t)
	a, b = testutil.NewNetns(t, "bf"), testutil.NewNetns(t, "bf")
	testutil.Exec(t, a, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b)
	for ns, addr := range map[string]netip.Addr{a: addrA, b: addrB} {
		testutil.Exec(t, ns, "ip", "addr", "add", addr.String()+"/64", "dev", "eth0", "nodad")
		testutil.Exec(t, ns, "ip", "link", "set", "eth0", "up")
	}
	return a, b
}

func listenIn(t *testing.T, ns string, l bfd.Link, c bfd.Config) *bfd.UDP {
	t.Helper()
	var u *bfd.UDP
	if err := nsutil.Do(ns, func() (err error) {
		u, err = bfd.ListenUDP(l, c, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.Close)
	return u
}

func waitState(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, limit)
		}
	}
}

// silence drops everything ns receives on eth0 (nftables netdev ingress,
// policy drop): the carrier stays.
func silence(t *testing.T, ns string, on bool) {
	t.Helper()
	if on {
		testutil.Exec(t, ns, "nft", "add", "table", "netdev", "bftest")
		testutil.Exec(t, ns, "nft", "add chain netdev bftest in { type filter hook ingress device eth0 priority 0; policy drop; }")
	} else {
		testutil.Exec(t, ns, "nft", "delete", "table", "netdev", "bftest")
	}
}

var fast = bfd.Config{DesiredMinTx: 50 * time.Millisecond, RequiredMinRx: 50 * time.Millisecond, DetectMult: 3}

// Two segchain sessions over a veth pair: Up, the source port in range,
// a packet with hop limit 64 dropped (GTSM), a silent link detected,
// back Up when it is repaired.
func TestPrivilegedUDPSessions(t *testing.T) {
	testutil.RequireTool(t, "nft")
	nsA, nsB := vethPair(t)
	a := listenIn(t, nsA, bfd.Link{Dev: "eth0", Local: addrA, Peer: addrB}, fast)
	b := listenIn(t, nsB, bfd.Link{Dev: "eth0", Local: addrB, Peer: addrA}, fast)
	waitState(t, "both up", 5*time.Second, func() bool { return a.Stats().State == bfd.Up && b.Stats().State == bfd.Up })
	if p := a.SourcePort(); p < bfd.SourcePortMin || p > bfd.SourcePortMax {
		t.Errorf("source port %d outside %d–%d", p, bfd.SourcePortMin, bfd.SourcePortMax)
	}
	waitState(t, "fast interval", 5*time.Second, func() bool { return a.Stats().TxInterval == 50*time.Millisecond })

	// A well-formed packet from b's address with hop limit 64.
	pk := bfd.Packet{Version: 1, State: bfd.Up, DetectMult: 3, MyDisc: b.LocalDisc(), YourDisc: a.LocalDisc(), DesiredMinTx: 50000, RequiredMinRx: 50000}
	if err := nsutil.Do(nsB, func() error {
		c, err := net.DialUDP("udp6", &net.UDPAddr{IP: addrB.AsSlice()}, &net.UDPAddr{IP: addrA.AsSlice(), Port: bfd.Port})
		if err != nil {
			return err
		}
		defer c.Close()
		raw, _ := c.SyscallConn()
		raw.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, 64) })
		_, err = c.Write(pk.Marshal())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitState(t, "hop limit 64 dropped", 2*time.Second, func() bool { return a.Stats().Drops[bfd.ReasonHopLimit] == 1 })

	silence(t, nsA, true)
	silence(t, nsB, true)
	waitState(t, "both down on a silent link", 5*time.Second, func() bool { return a.Stats().State == bfd.Down && b.Stats().State == bfd.Down })
	if d := a.Stats().Diag; d != bfd.DiagTimeExpired {
		t.Errorf("diag %s, want time expired", d)
	}
	silence(t, nsA, false)
	silence(t, nsB, false)
	waitState(t, "up again", 5*time.Second, func() bool { return a.Stats().State == bfd.Up && b.Stats().State == bfd.Up })
	t.Logf("a: %+v", a.Stats())
}

// bfdPeer is one peer of vtysh's show bfd peers json.
type bfdPeer struct {
	Peer        string `json:"peer"`
	Status      string `json:"status"`
	ID          uint32 `json:"id"`
	RemoteID    uint32 `json:"remote-id"`
	Diagnostic  string `json:"diagnostic"`
	RemoteDiag  string `json:"remote-diagnostic"`
	TxInterval  int    `json:"transmit-interval"`
	RemoteRx    int    `json:"remote-receive-interval"`
	RemoteMult  int    `json:"remote-detect-multiplier"`
	RemoteTxInt int    `json:"remote-transmit-interval"`
}

func frrPeers(t *testing.T, ns, dir string) []bfdPeer {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "vtysh", "--vty_socket", dir, "-c", "show bfd peers json").Output()
	if err != nil {
		t.Fatalf("vtysh: %v", err)
	}
	s := string(out)
	if i := strings.IndexByte(s, '['); i > 0 {
		s = s[i:]
	}
	var ps []bfdPeer
	if err := json.Unmarshal([]byte(s), &ps); err != nil {
		t.Fatalf("show bfd peers json: %v\n%s", err, out)
	}
	return ps
}

// Interop with FRR's bfdd (the oracle): a session with a segchain peer
// comes up (bfdd knows our discriminator), then goes down on bfdd's side
// when our end falls silent (the session stopped, then a netdev drop),
// and up again.
func TestPrivilegedFRRInterop(t *testing.T) {
	testutil.RequireTool(t, "nft")
	if err := frr.Installed(); err != nil {
		t.Fatal(err) // make deps installs FRR
	}
	if _, err := os.Stat(frr.Bin + "/bfdd"); err != nil {
		t.Fatal("FRR has no bfdd")
	}
	nsA, nsB := vethPair(t)
	dir, err := os.MkdirTemp("", "bf-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := frr.Stop(dir); err != nil {
			t.Errorf("stop FRR: %v", err)
		}
		os.RemoveAll(dir)
	})
	c := frr.Config{Zebra: "hostname b\n", BGPD: "hostname b\n", BFDD: fmt.Sprintf(`hostname b
bfd
 peer %s local-address %s interface eth0
  detect-multiplier 3
  receive-interval 100
  transmit-interval 100
 exit
exit
`, addrA, addrB)}
	if err := frr.Start(nsB, dir, c); err != nil {
		t.Fatal(err)
	}
	cfg := bfd.Config{DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 100 * time.Millisecond, DetectMult: 3}
	start := func() *bfd.UDP {
		var u *bfd.UDP
		if err := nsutil.Do(nsA, func() (err error) {
			u, err = bfd.ListenUDP(bfd.Link{Dev: "eth0", Local: addrA, Peer: addrB}, cfg, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(u.Close)
		return u
	}
	peer := func() bfdPeer {
		for _, p := range frrPeers(t, nsB, dir) {
			if p.Peer == addrA.String() {
				return p
			}
		}
		return bfdPeer{}
	}
	a := start()
	waitState(t, "up with bfdd", 10*time.Second, func() bool { return a.Stats().State == bfd.Up && peer().Status == "up" })
	if p := peer(); p.RemoteID != a.LocalDisc() || p.ID != a.Stats().RemoteDisc {
		t.Errorf("bfdd: id %d remote-id %d; segchain: local %d remote %d", p.ID, p.RemoteID, a.LocalDisc(), a.Stats().RemoteDisc)
	}
	waitState(t, "100 ms both ways", 5*time.Second, func() bool { return a.Stats().TxInterval == 100*time.Millisecond && peer().RemoteTxInt == 100 })
	t.Logf("bfdd: %+v; segchain: %+v", peer(), a.Stats())

	// Our end stops sending: bfdd's detection time expires.
	a.Close()
	waitState(t, "bfdd down after our session stopped", 5*time.Second, func() bool { return peer().Status == "down" })
	if p := peer(); p.Diagnostic != "control detection time expired" {
		t.Errorf("bfdd's diagnostic %q", p.Diagnostic)
	}
	a = start()
	waitState(t, "up again", 10*time.Second, func() bool { return a.Stats().State == bfd.Up && peer().Status == "up" })

	// A silent link (drop on our side's ingress: bfdd hears nothing
	// back... and we hear nothing either).
	silence(t, nsA, true)
	waitState(t, "both down on a silent link", 5*time.Second, func() bool { return a.Stats().State == bfd.Down && peer().Status == "down" })
	silence(t, nsA, false)
	waitState(t, "up after repair", 10*time.Second, func() bool { return a.Stats().State == bfd.Up && peer().Status == "up" })
}
