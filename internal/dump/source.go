package dump

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// CaptureInfo describes one captured frame.
type CaptureInfo struct {
	Time   time.Time
	CapLen int
	Len    int
}

// Source yields captured frames. The data returned by Next is valid until
// the next call. Next returns io.EOF at the end of a file.
type Source interface {
	Next(ctx context.Context) ([]byte, CaptureInfo, error)
	LinkType() uint32
	Close() error
}

// ErrNotAvailable is returned for features this build cannot provide.
var ErrNotAvailable = errors.New("not available")

// ---- pcap / pcapng files ----

type fileSource struct {
	f      *os.File
	next   func() ([]byte, CaptureInfo, error)
	link   uint32
	filter *bpf.VM
	n      uint
}

// OpenFile opens a pcap or pcapng file (detected by its magic number).
// SetFilter adds a capture filter.
func OpenFile(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open capture: %w", err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	magic, err := br.Peek(4)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read capture %s: %w", path, err)
	}
	s := &fileSource{f: f}
	if bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		r, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read pcapng %s: %w", path, err)
		}
		s.link = uint32(r.LinkType())
		s.next = func() ([]byte, CaptureInfo, error) {
			d, ci, err := r.ZeroCopyReadPacketData()
			return d, CaptureInfo{Time: ci.Timestamp, CapLen: ci.CaptureLength, Len: ci.Length}, err
		}
	} else {
		r, err := pcapgo.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read pcap %s: %w", path, err)
		}
		s.link = uint32(r.LinkType())
		s.next = func() ([]byte, CaptureInfo, error) {
			d, ci, err := r.ZeroCopyReadPacketData()
			return d, CaptureInfo{Time: ci.Timestamp, CapLen: ci.CaptureLength, Len: ci.Length}, err
		}
	}
	return s, nil
}

// SetFilter installs a classic BPF program run on every frame of a file
// source (live sources get it in the kernel at open time).
func SetFilter(src Source, prog []bpf.RawInstruction) error {
	fs, ok := src.(*fileSource)
	if !ok || len(prog) == 0 {
		return nil
	}
	insns, ok := bpf.Disassemble(prog)
	if !ok {
		return fmt.Errorf("capture filter: cannot disassemble program")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		return fmt.Errorf("capture filter: %w", err)
	}
	fs.filter = vm
	return nil
}

func (s *fileSource) Next(ctx context.Context) ([]byte, CaptureInfo, error) {
	for {
		if s.n++; s.n%1024 == 0 && ctx.Err() != nil {
			return nil, CaptureInfo{}, ctx.Err()
		}
		d, ci, err := s.next()
		if err != nil {
			return nil, ci, err
		}
		if s.filter != nil {
			if n, err := s.filter.Run(d); err != nil || n == 0 {
				continue
			}
		}
		return d, ci, nil
	}
}
func (s *fileSource) LinkType() uint32 { return s.link }
func (s *fileSource) Close() error     { return s.f.Close() }

// ---- capture filters ----

var dltNames = map[uint32]string{LinkEthernet: "EN10MB", LinkRaw: "RAW", LinkLinuxSLL: "LINUX_SLL", LinkNull: "NULL",
	LinkLoop: "LOOP", LinkIPv4: "IPV4", LinkIPv6: "IPV6", LinkSLL2: "LINUX_SLL2"}

// CompileFilter compiles a tcpdump filter expression for link type link
// with `tcpdump -dd` (tcpdump is a segchain dependency).
func CompileFilter(expr string, link uint32) ([]bpf.RawInstruction, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil
	}
	dlt, ok := dltNames[link]
	if !ok {
		return nil, fmt.Errorf("compile filter: link type %d: %w", link, ErrNotAvailable)
	}
	if _, err := exec.LookPath("tcpdump"); err != nil {
		return nil, fmt.Errorf("compile filter %q: segchain compiles filter expressions with tcpdump -dd, and tcpdump is not installed (apt-get install tcpdump, or make deps; a dump without a filter expression needs no tcpdump): %w", expr, ErrNotAvailable)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("tcpdump", "-dd", "-y", dlt, "--", expr)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("compile filter %q: %v: %s", expr, err, strings.TrimSpace(stderr.String()))
	}
	return parseDD(out)
}

// parseDD parses `tcpdump -dd` output: lines "{ 0x28, 0, 0, 0x0000000c },".
func parseDD(out []byte) ([]bpf.RawInstruction, error) {
	var prog []bpf.RawInstruction
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.Trim(strings.TrimSpace(line), "{},")
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("parse tcpdump -dd line %q", line)
		}
		var v [4]uint64
		for i := range f {
			n, err := strconv.ParseUint(strings.TrimSpace(f[i]), 0, 32)
			if err != nil {
				return nil, fmt.Errorf("parse tcpdump -dd line %q: %w", line, err)
			}
			v[i] = n
		}
		prog = append(prog, bpf.RawInstruction{Op: uint16(v[0]), Jt: uint8(v[1]), Jf: uint8(v[2]), K: uint32(v[3])})
	}
	if len(prog) == 0 {
		return nil, fmt.Errorf("tcpdump -dd printed no program")
	}
	return prog, nil
}

// ---- live capture (AF_PACKET) ----

type liveSource struct {
	link uint32
	tp   *afpacket.TPacket
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// LiveLinkType returns the pcap link type of iface in namespace netns.
func LiveLinkType(netns, iface string) (uint32, error) {
	var link uint32
	err := nsutil.Do(netns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		link = LinkRaw
		if len(ifi.HardwareAddr) == 6 || ifi.Flags&net.FlagLoopback != 0 {
			link = LinkEthernet
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("interface %s: %w", iface, err)
	}
	return link, nil
}

// bpfRetK is classic BPF's "ret #k": with k 0, drop the packet.
const bpfRetK = 0x06

// OpenLive opens an AF_PACKET capture on iface inside namespace netns (""
// for the current one); the socket stays in that namespace. prog, if not
// nil, is attached as the kernel socket filter. The caller may use
// LiveLinkType to compile prog.
//
// The capture uses a TPACKET ring, so the kernel copies each frame when it
// is captured. A plain recvfrom socket is not enough on an SRv6 node: its
// queued skb shares data with the packet the stack goes on processing, and
// seg6local rewrites the destination address and Segments Left in place, so
// the capture would show the packet after the behaviour ran.
func OpenLive(netns, iface string, prog []bpf.RawInstruction) (Source, error) {
	s := &liveSource{}
	err := nsutil.Do(netns, func() error {
		link, err := LiveLinkType("", iface)
		if err != nil {
			return err
		}
		s.link = link
		tp, err := afpacket.NewTPacket(afpacket.OptInterface(iface), afpacket.TPacketVersion2,
			afpacket.OptPollTimeout(100*time.Millisecond))
		if err != nil {
			return fmt.Errorf("open packet ring: %w", err)
		}
		s.tp = tp
		if len(prog) > 0 {
			// The ring receives from the moment it is opened: frames that
			// came before the filter would pass unfiltered. Reject
			// everything, drain what is queued, then attach the filter
			// (what libpcap does).
			if err := tp.SetBPF([]bpf.RawInstruction{{Op: bpfRetK}}); err != nil {
				return fmt.Errorf("attach filter: %w", err)
			}
			for {
				if _, _, err := tp.ZeroCopyReadPacketData(); err != nil {
					break // afpacket.ErrTimeout: the ring is empty
				}
			}
			if err := tp.SetBPF(prog); err != nil {
				return fmt.Errorf("attach filter: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		if s.tp != nil {
			s.tp.Close()
		}
		where := iface
		if netns != "" {
			where = netns + ":" + iface
		}
		return nil, fmt.Errorf("live capture on %s: %w", where, err)
	}
	return s, nil
}

func (s *liveSource) Next(ctx context.Context) ([]byte, CaptureInfo, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, CaptureInfo{}, err
		}
		data, ci, err := s.tp.ZeroCopyReadPacketData()
		if errors.Is(err, afpacket.ErrTimeout) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, CaptureInfo{}, fmt.Errorf("recv: %w", err)
		}
		return data, CaptureInfo{Time: ci.Timestamp, CapLen: ci.CaptureLength, Len: ci.Length}, nil
	}
}
func (s *liveSource) LinkType() uint32 { return s.link }
func (s *liveSource) Close() error     { s.tp.Close(); return nil }

// OpenFiltered opens a capture file with the tcpdump-syntax filter expr
// ("" = every packet) compiled for its link type.
func OpenFiltered(path, expr string) (Source, error) {
	src, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	prog, err := CompileFilter(expr, src.LinkType())
	if err == nil {
		err = SetFilter(src, prog)
	}
	if err != nil {
		src.Close()
		return nil, err
	}
	return src, nil
}

// OpenLiveFiltered is OpenLive with the tcpdump-syntax filter expr ("" =
// every packet) compiled for the interface's link type.
func OpenLiveFiltered(netns, iface, expr string) (Source, error) {
	link, err := LiveLinkType(netns, iface)
	if err != nil {
		return nil, err
	}
	prog, err := CompileFilter(expr, link)
	if err != nil {
		return nil, err
	}
	return OpenLive(netns, iface, prog)
}
