package testutil

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// Capture is a packet capture on one interface of a namespace, writing a
// pcap file. It is an AF_PACKET socket of the test process with a
// TPACKET_V2 ring, which the kernel fills with a copy of each packet when it
// sees it (a plain socket queues a clone that shares the data, and an SRv6
// End applied in place afterwards shows up in it); tcpdump only compiles
// the filter. Both ends are deterministic:
//
//   - ready: the socket is created with protocol 0 (it receives nothing),
//     gets its ring and filter, and is bound to the interface before
//     StartCapture returns; every packet the interface sees afterwards is
//     copied to the ring.
//   - stopped: Wait reads the ring until it is empty before closing the
//     file, so every packet the kernel delivered before the stop is in the
//     pcap, however late the reader got the CPU. (tcpdump's "listening on"
//     was a fine readiness signal, but a tcpdump that had not run yet when
//     the test stopped it with SIGINT lost what sat in its ring.)
type Capture struct {
	t       testing.TB
	fd      int
	ring    []byte
	path    string
	count   int
	inbound bool
	n       atomic.Int64
	stop    atomic.Bool
	done    chan struct{} // closed when the reader goroutine returned
	full    chan struct{} // closed when count packets were captured
	mu      sync.Mutex
	log     bytes.Buffer
	once    sync.Once
}

// The ring: frames big enough for the 64 KiB GSO frames a veth hands over.
const (
	captureFrame  = 1 << 16
	captureFrames = 128
	tpHdrLen      = 32 // TPACKET_ALIGN(sizeof(struct tpacket2_hdr))
	tpStatusUser  = 1  // TP_STATUS_USER
)

// StartCapture captures on iface in namespace ns with a pcap-filter
// expression (may be empty), stopping by itself after count packets when
// count > 0. It returns once the capture receives packets. The capture is
// stopped in t.Cleanup if the test never calls Wait.
func StartCapture(t testing.TB, ns, iface, filter string, count int) *Capture {
	t.Helper()
	return startCapture(t, ns, iface, filter, count, false)
}

// StartInboundCapture is StartCapture for the packets iface receives only
// (tcpdump -Q in).
func StartInboundCapture(t testing.TB, ns, iface, filter string, count int) *Capture {
	t.Helper()
	return startCapture(t, ns, iface, filter, count, true)
}

func startCapture(t testing.TB, ns, iface, filter string, count int, inbound bool) *Capture {
	t.Helper()
	RequireTool(t, "tcpdump")
	prog, err := compileFilter(ns, iface, filter)
	if err != nil {
		t.Fatal(err)
	}
	c := &Capture{t: t, fd: -1, path: filepath.Join(t.TempDir(), UniqueName("cap-")+".pcap"), count: count,
		inbound: inbound, done: make(chan struct{}), full: make(chan struct{})}
	var ifindex int
	err = nsutil.Do(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		ifindex = ifi.Index
		// Protocol 0: no packet is queued before the ring and the filter
		// are in place and the socket is bound (libpcap does the same).
		c.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		t.Fatalf("capture in %s on %s: %v", ns, iface, err)
	}
	fail := func(what string, err error) {
		if c.ring != nil {
			_ = unix.Munmap(c.ring)
		}
		unix.Close(c.fd)
		t.Fatalf("capture in %s on %s: %s: %v", ns, iface, what, err)
	}
	if err := unix.SetsockoptInt(c.fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		fail("TPACKET_V2", err)
	}
	req := unix.TpacketReq{Block_size: captureFrame, Block_nr: captureFrames, Frame_size: captureFrame, Frame_nr: captureFrames}
	if err := unix.SetsockoptTpacketReq(c.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		fail("rx ring", err)
	}
	if c.ring, err = unix.Mmap(c.fd, 0, captureFrame*captureFrames, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		fail("mmap ring", err)
	}
	if len(prog) > 0 {
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if err := unix.SetsockoptSockFprog(c.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
			fail("attach filter", err)
		}
	}
	if inbound {
		if err := unix.SetsockoptInt(c.fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			fail("ignore outgoing", err)
		}
	}
	if err := unix.Bind(c.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		fail("bind", err)
	}
	link := layers.LinkTypeEthernet
	if ifr, err := unix.NewIfreq(iface); err == nil {
		// Device ioctls look the name up in the socket's namespace.
		if unix.IoctlIfreq(c.fd, unix.SIOCGIFHWADDR, ifr) == nil {
			switch ifr.Uint16() {
			case unix.ARPHRD_NONE, unix.ARPHRD_TUNNEL, unix.ARPHRD_TUNNEL6:
				link = layers.LinkTypeRaw
			}
		}
	}
	f, err := os.Create(c.path)
	if err != nil {
		fail("create pcap", err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(captureFrame, link); err != nil {
		f.Close()
		fail("write pcap", err)
	}
	go c.read(f, w)
	t.Cleanup(c.stopAndDrain)
	return c
}

// read takes packets off the ring until stopped (then until the ring is
// empty) or until count packets were captured.
func (c *Capture) read(f *os.File, w *pcapgo.Writer) {
	defer close(c.done)
	defer f.Close()
	for i := 0; ; {
		frame := c.ring[i*captureFrame : (i+1)*captureFrame]
		status := (*uint32)(unsafe.Pointer(&frame[0]))
		if atomic.LoadUint32(status)&tpStatusUser == 0 {
			if c.stop.Load() {
				return // drained: the kernel had handed over nothing more
			}
			pfd := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(pfd, 50); err != nil && !errors.Is(err, unix.EINTR) {
				c.logf("poll: %v\n", err)
				return
			}
			continue
		}
		length := int(binary.NativeEndian.Uint32(frame[4:]))
		snap := int(binary.NativeEndian.Uint32(frame[8:]))
		mac := int(binary.NativeEndian.Uint16(frame[12:]))
		sec, nsec := binary.NativeEndian.Uint32(frame[16:]), binary.NativeEndian.Uint32(frame[20:])
		data := frame[mac:min(mac+snap, len(frame))]
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(int64(sec), int64(nsec)), CaptureLength: len(data), Length: length}
		err := w.WritePacket(ci, data)
		atomic.StoreUint32(status, 0) // TP_STATUS_KERNEL: the frame goes back
		i = (i + 1) % captureFrames
		if err != nil {
			c.logf("write pcap: %v\n", err)
			return
		}
		if got := c.n.Add(1); c.count > 0 && got == int64(c.count) {
			close(c.full)
			return
		}
	}
}

func (c *Capture) logf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(&c.log, format, args...)
}

// Log describes the capture: packets captured and dropped by the kernel
// (a full ring), and any error.
func (c *Capture) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d packets captured\n%s", c.n.Load(), c.log.String())
}

// Count is the number of packets captured so far.
func (c *Capture) Count() int { return int(c.n.Load()) }

// stopAndDrain stops the reader once it has emptied the ring and closes
// the socket.
func (c *Capture) stopAndDrain() {
	c.once.Do(func() {
		c.stop.Store(true)
		<-c.done
		if st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil && st.Drops > 0 {
			c.logf("%d packets dropped by kernel\n", st.Drops)
		}
		_ = unix.Munmap(c.ring)
		unix.Close(c.fd)
	})
}

// Wait lets the capture run until it has its count of packets or until
// timeout has passed (a bound on the wait, not an assertion), stops it
// (keeping every packet already delivered to it) and returns the pcap path.
func (c *Capture) Wait(timeout time.Duration) string {
	c.t.Helper()
	select {
	case <-c.full:
	case <-time.After(timeout):
	}
	c.stopAndDrain()
	return c.path
}

// Path is the pcap file (complete once Wait returned).
func (c *Capture) Path() string { return c.path }

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// compileFilter compiles a pcap-filter expression for iface's link type
// with tcpdump -ddd, run in the namespace (tcpdump opens the interface for
// its link type; it captures nothing).
func compileFilter(ns, iface, filter string) ([]unix.SockFilter, error) {
	if strings.TrimSpace(filter) == "" {
		return nil, nil
	}
	args := []string{"tcpdump", "-ddd", "-i", iface, "--", filter}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("compile capture filter %q on %s/%s: %v: %s", filter, ns, iface, err, strings.TrimSpace(stderr.String()))
	}
	// -ddd: the instruction count, then "code jt jf k" per line, decimal.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var n int
	if _, err := fmt.Sscan(lines[0], &n); err != nil || n != len(lines)-1 {
		return nil, fmt.Errorf("compile capture filter %q: unexpected tcpdump -ddd output:\n%s", filter, out)
	}
	prog := make([]unix.SockFilter, n)
	for i, l := range lines[1:] {
		if _, err := fmt.Sscan(l, &prog[i].Code, &prog[i].Jt, &prog[i].Jf, &prog[i].K); err != nil {
			return nil, fmt.Errorf("compile capture filter %q: line %q: %w", filter, l, err)
		}
	}
	return prog, nil
}

// Packet is one packet as tshark dissects it: every requested field with all
// its occurrences in protocol order (outer header first).
type Packet map[string][]string

// First returns the first occurrence of field, or "".
func (p Packet) First(field string) string {
	if v := p[field]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Tshark dissects a pcap with tshark and returns the requested fields of
// every packet. tshark is the oracle: segchain's own decoders are not used.
func Tshark(t testing.TB, pcap string, fields ...string) []Packet {
	t.Helper()
	RequireTool(t, "tshark")
	args := []string{"-r", pcap, "-n", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-E", "separator=/t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	args = append(args, "-e", "icmpv6.checksum.status") // checked below, not returned
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("tshark -r %s: %v\n%s", pcap, err, stderr)
	}
	var pkts []Packet
	for n, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		cols := strings.Split(line, "\t")
		p := Packet{}
		for i, f := range fields {
			if i < len(cols) && cols[i] != "" {
				p[f] = strings.Split(cols[i], "|")
			}
		}
		// Every ICMPv6 message that passes through here (errors segchain's
		// programs build included) has its checksum verified by tshark.
		if i := len(fields); i < len(cols) && cols[i] != "" {
			for _, st := range strings.Split(cols[i], "|") {
				if st != "1" {
					t.Errorf("%s packet %d: tshark icmpv6.checksum.status = %s (0 bad, 2 unverified)", filepath.Base(pcap), n+1, st)
				}
			}
		}
		pkts = append(pkts, p)
	}
	return pkts
}

// PcapFrames returns a pcap file's frames in order (tests comparing two
// paths' packets byte for byte).
func PcapFrames(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, append([]byte(nil), data...))
	}
}
