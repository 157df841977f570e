package fuzz

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// corpusDir holds every frame that ever got through the boundary (found by
// scripts/fuzz-boundary.py, or one of issue 24's findings, written by
// scripts/fuzz-boundary-seeds.py): one .hex file each, comment lines
// first:
//
//	# what it is
//	# domain: default | hmac | default+sf1-boundary | default+nfv1-end-external
//	# sender: NODE[:IFACE]   (the frame leaves NODE by IFACE)
//	# expect: dropped | dropped-uncounted | delivered | known-bypass
//	<the Ethernet frame in hex; its MAC addresses are rewritten>
//
// "dropped-uncounted" is a frame the kernel drops where no segchain counter
// sees it (it must not get past its entry node; its count is logged);
// "delivered" is a control (a legitimate frame that must reach host d, so
// that a frame built wrongly cannot pass as dropped); "known-bypass" is a
// frame that still gets through, kept to be fixed: it is replayed and
// logged, not failed.
const corpusDir = "testdata/corpus"

type corpusFrame struct {
	name, what, domain, sender, expect string
	frame                              []byte
}

func readCorpus(t *testing.T) []corpusFrame {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.hex"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in %s: %v", corpusDir, err)
	}
	var out []corpusFrame
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := corpusFrame{name: strings.TrimSuffix(filepath.Base(f), ".hex")}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "# domain: "):
				c.domain = strings.TrimPrefix(line, "# domain: ")
			case strings.HasPrefix(line, "# sender: "):
				c.sender = strings.TrimPrefix(line, "# sender: ")
			case strings.HasPrefix(line, "# expect: "):
				c.expect = strings.Fields(strings.TrimPrefix(line, "# expect: "))[0]
			case strings.HasPrefix(line, "#"):
				if c.what == "" {
					c.what = strings.TrimSpace(strings.TrimPrefix(line, "#"))
				}
			case line != "":
				if c.frame, err = hex.DecodeString(line); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
			}
		}
		if c.domain == "" || c.sender == "" || c.frame == nil || len(c.frame) < 14 ||
			(c.expect != "dropped" && c.expect != "dropped-uncounted" && c.expect != "delivered" && c.expect != "known-bypass") {
			t.Fatalf("%s: needs domain, sender, expect (dropped|dropped-uncounted|delivered|known-bypass) and a frame", f)
		}
		if bytes.Index(c.frame, []byte("SCFZ")) < 0 {
			t.Fatalf("%s: the frame has no SCFZ marker", f)
		}
		out = append(out, c)
	}
	return out
}

// TestFuzzCorpusParses runs without root: every corpus file is well formed.
func TestFuzzCorpusParses(t *testing.T) {
	cs := readCorpus(t)
	var seeds int
	for _, c := range cs {
		if strings.HasPrefix(c.name, "issue24-") {
			seeds++
		}
	}
	if seeds < 5 {
		t.Errorf("%d seed frames of issue 24, want its findings 1-5", seeds)
	}
}

// TestFuzzCorpusReplay replays every corpus frame in a lab of its domain,
// three copies from its sender: nothing may be seen past the node where it
// enters (a capture on every interface of every other node, matched by the
// frame's marker; ICMP errors quoting it are the node answering, not the
// frame), and segchain must count three drops (boundary counters of every
// node plus SID errors). A control frame must reach host d instead.
func TestFuzzCorpusReplay(t *testing.T) {
	testutil.RequireRoot(t)
	byDomain := map[string][]corpusFrame{}
	for _, c := range readCorpus(t) {
		byDomain[c.domain] = append(byDomain[c.domain], c)
	}
	domains := make([]string, 0, len(byDomain))
	for d := range byDomain {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	for _, d := range domains {
		t.Run(d, func(t *testing.T) {
			l := labUp(t, domainFile(t, d))
			l.primeProxies(t)
			for _, c := range byDomain[d] {
				t.Run(c.name, func(t *testing.T) { l.replay(t, c) })
			}
		})
	}
}

const copies = 3

func (l *lab) replay(t *testing.T, c corpusFrame) {
	node, iface, _ := strings.Cut(c.sender, ":")
	iface, entry, entryIf := l.peer(t, node, iface)
	frame := append([]byte(nil), c.frame...)
	copy(frame[0:6], l.mac(t, entry, entryIf))
	copy(frame[6:12], l.mac(t, node, iface))
	m := bytes.Index(frame, []byte("SCFZ"))
	marker := frame[m : m+12]

	type capture struct {
		node, iface string
		c           *testutil.Capture
	}
	var caps []capture
	for _, k := range l.links {
		for _, e := range [][2]string{{k.a, k.aif}, {k.b, k.bif}} {
			if e[0] != node {
				caps = append(caps, capture{e[0], e[1], testutil.StartInboundCapture(t, l.ns[e[0]], e[1], "", 0)})
			}
		}
	}
	before := l.counted(t)
	sendFrames(t, l.ns[node], iface, frame, copies)

	var atD *testutil.Capture
	for _, cp := range caps {
		if cp.node == "d" {
			atD = cp.c
		}
	}
	switch c.expect {
	case "delivered":
		if atD == nil {
			t.Fatal("the lab has no host d")
		}
		waitFor(func() bool { return atD.Count() >= copies })
	default:
		waitFor(func() bool { return l.counted(t)-before >= copies })
	}
	// Every copy is either counted as a drop or on its way: once all are
	// counted (or after the wait's bound, when some are not) nothing of the
	// frame is left in flight, so the captures can stop.
	counted := l.counted(t) - before
	seen := map[string]int{}
	for _, cp := range caps {
		for _, p := range testutil.PcapFrames(t, cp.c.Wait(0)) {
			if bytes.Contains(p, marker) && !icmpError(p) {
				seen[cp.node+":"+cp.iface]++
			}
		}
	}
	var past []string
	for where := range seen {
		if n, _, _ := strings.Cut(where, ":"); n != entry {
			past = append(past, where)
		}
	}
	sort.Strings(past)
	switch c.expect {
	case "delivered":
		if seen["d:eth-egress"] != copies {
			t.Errorf("control %s: %d of %d copies reached d (seen at %v)", c, seen["d:eth-egress"], copies, seen)
		}
	case "dropped":
		if len(past) > 0 {
			t.Errorf("%s: got past %s:%s, seen at %v", c, entry, entryIf, past)
		}
		if counted != copies {
			t.Errorf("%s: segchain counted %d drops for %d copies", c, counted, copies)
		}
	case "dropped-uncounted":
		if len(past) > 0 {
			t.Errorf("%s: got past %s:%s, seen at %v", c, entry, entryIf, past)
		}
		t.Logf("%s: not past %s, %d of %d counted by segchain (the kernel drops it)", c.name, entry, counted, copies)
	case "known-bypass":
		t.Logf("known bypass %s: seen past %s at %v, %d of %d counted", c, entry, past, counted, copies)
	}
}

// waitFor polls cond for up to 5 s (the frames cross a few namespaces).
func waitFor(cond func() bool) {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
}

// sendFrames writes frame n times on iface of namespace ns with an
// AF_PACKET socket: VLAN tags and malformed headers go out as they are.
func sendFrames(t *testing.T, ns, iface string, frame []byte, n int) {
	t.Helper()
	err := nsutil.Do(ns, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifr, err := unix.NewIfreq(iface)
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
			return fmt.Errorf("ifindex of %s: %w", iface, err)
		}
		sa := &unix.SockaddrLinklayer{Ifindex: int(ifr.Uint32()), Halen: 6}
		for i := 0; i < n; i++ {
			if err := unix.Sendto(fd, frame, 0, sa); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send on %s in %s: %v", iface, ns, err)
	}
}

// icmpError: an untagged ICMPv6 (type < 128) or ICMPv4 error right after
// the IP header, i.e. a node answering about the frame.
func icmpError(p []byte) bool {
	if len(p) < 14 {
		return false
	}
	switch {
	case p[12] == 0x86 && p[13] == 0xdd && len(p) > 54:
		return p[20] == 58 && p[54] < 128
	case p[12] == 0x08 && p[13] == 0x00 && len(p) > 34:
		ihl := int(p[14]&15) * 4
		return p[23] == 1 && len(p) > 14+ihl && p[14+ihl] != 0 && p[14+ihl] != 8
	}
	return false
}

// runJSON runs the segchain binary and decodes its standard output.
func runJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	cmd := exec.Command(segchainBin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("segchain %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("segchain %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// primeProxies fills the End.AD cache of the default domain's firewalled
// chain (TCP to port 8080 from s to d) the way its traffic does, so that a
// frame that reaches the SF meets the proxy of a domain in service.
func (l *lab) primeProxies(t *testing.T) {
	if l.ns["s"] == "" || l.ns["d"] == "" || l.ns["sf1"] == "" {
		return
	}
	iface, entry, entryIf := l.peer(t, "s", "")
	src, dst := netip.MustParseAddr("fc00:1a::a"), netip.MustParseAddr("fc00:4d::d")
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], 4000)
	binary.BigEndian.PutUint16(tcp[2:], 8080)
	tcp[12], tcp[13] = 5<<4, 0x02 // data offset 5 words, SYN
	frame := testutil.Eth(l.mac(t, entry, entryIf), l.mac(t, "s", iface), 0x86dd, testutil.IPv6(src, dst, 6, 64, tcp))
	sendFrames(t, l.ns["s"], iface, frame, 3)
}
