package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/segchain/segchain/internal/ids"
)

// varFlags collects repeated -var NAME=VALUE.
type varFlags map[string]string

func (v varFlags) String() string { return "" }

func (v varFlags) Set(s string) error {
	name, val, ok := strings.Cut(s, "=")
	name = strings.TrimPrefix(name, "$")
	if !ok || name == "" || val == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	v[name] = val
	return nil
}

// defaultVars are Suricata's usual variables, overridable with -var.
func defaultVars() varFlags {
	return varFlags{
		"HOME_NET":     "any",
		"EXTERNAL_NET": "any",
		"HTTP_PORTS":   "[80,8080]",
	}
}

const usage = `ids: an SR-aware IDS/IPS (segchain example service)

Usage:
  ids -rules FILE -pcap FILE [-ips] [-var NAME=VALUE]... [-args-bits N]
      [-drop-undecodable] [-write-pcap OUT] [-eve OUT]
  ids -rules FILE -check
  ids -rules FILE -sid SID[/LEN] -dev DEV [-netns NS] [-ips] [-batch] ...   (live mode)

-synthetic-rules N replaces -rules FILE with N generated content rules (the
benchmark rule sets: docs/ids.md).

Offline (-pcap): reads a capture (raw IP, Ethernet or Linux cooked; pcap
or pcapng), inspects the inner packet of each SRv6 packet (and plain
packets as they are) against the rules, and writes one EVE JSON line per
alert to standard output (or -eve OUT); a summary goes to standard error.
With -ips, packets matched by a drop rule are dropped: -write-pcap writes
the packets that are forwarded.

Live (-sid, -dev): binds the SIDs with pkg/srv6svc (AF_XDP) and
forwards (End) or drops each packet; SIGHUP reloads the rules (a file with
errors is refused and the running rules stay); SIGINT/SIGTERM stop.

Rule errors are all reported, with their line and column; the exit status
is then 2. -check only parses the rules.

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ids", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	vars := defaultVars()
	rulesFile := fs.String("rules", "", "rule `file` (Suricata syntax subset, see docs/ids.md)")
	pcapFile := fs.String("pcap", "", "capture `file` to inspect (offline mode)")
	ips := fs.Bool("ips", false, "IPS mode: drop rules drop (default IDS: alert only)")
	argsBits := fs.Int("args-bits", 16, "length of the SID's ARGS field (low `bits` of the active segment)")
	dropUndecodable := fs.Bool("drop-undecodable", false, "in IPS mode, drop packets whose inner packet cannot be decoded")
	writePcap := fs.String("write-pcap", "", "write the forwarded packets to this pcap `file`")
	eveFile := fs.String("eve", "", "write EVE lines to this `file` instead of standard output")
	check := fs.Bool("check", false, "parse the rules, report errors, and exit")
	synthetic := fs.Int("synthetic-rules", 0, "instead of -rules, `N` generated content rules (the benchmark rule sets, see docs/ids.md)")
	live := addLiveFlags(fs)
	fs.Var(vars, "var", "define a rule variable: `NAME=VALUE` (repeatable; HOME_NET, EXTERNAL_NET default to any, HTTP_PORTS to [80,8080])")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if (*rulesFile == "") == (*synthetic == 0) || (*pcapFile == "" && !*check && !live.enabled()) || fs.NArg() > 0 ||
		(*pcapFile != "" && live.enabled()) {
		fmt.Fprintln(stderr, "ids: one of -rules or -synthetic-rules, and one of -pcap (offline) or -sid/-dev (live), are required (or -rules with -check)")
		return 2
	}
	if *synthetic > 0 {
		*rulesFile = fmt.Sprintf("synthetic-%d", *synthetic)
	}
	// parse reads the rules again at every call (live mode reloads them
	// on SIGHUP).
	parse := func() ([]*ids.Rule, error) {
		if *synthetic > 0 {
			return ids.Parse(strings.NewReader(ids.SyntheticRules(*synthetic)), *rulesFile, vars)
		}
		return ids.ParseFile(*rulesFile, vars)
	}
	rules, err := parse()
	if err != nil {
		reportRuleErrors(stderr, *rulesFile, err)
		return 2
	}
	if *check {
		fmt.Fprintf(stderr, "ids: %d rules OK\n", len(rules))
		return 0
	}
	eve := stdout
	if *eveFile != "" {
		f, err := os.Create(*eveFile)
		if err != nil {
			fmt.Fprintln(stderr, "ids:", err)
			return 1
		}
		defer f.Close()
		eve = f
	}
	mode := ids.ModeIDS
	if *ips {
		mode = ids.ModeIPS
	}
	opts := ids.Options{Mode: mode, Alerts: eve, DropUndecodable: *dropUndecodable}
	engine, err := ids.New(rules, opts)
	if err != nil {
		fmt.Fprintln(stderr, "ids:", err)
		return 1
	}
	if live.enabled() {
		reload := func() (*ids.Engine, error) {
			rules, err := parse()
			if err != nil {
				return nil, err
			}
			return ids.New(rules, opts)
		}
		if err := live.run(ctx, engine, *rulesFile, reload, stderr); err != nil {
			fmt.Fprintln(stderr, "ids:", err)
			return 1
		}
		return 0
	}
	sum, err := inspectCapture(engine, *pcapFile, *argsBits, *writePcap)
	if err != nil {
		fmt.Fprintln(stderr, "ids:", err)
		return 1
	}
	st := engine.Stats()
	fmt.Fprintf(stderr, "ids: %s mode, %d rules: %d packets, %d forwarded, %d dropped, %d alerts, %d not inspected\n",
		mode, len(rules), sum.packets, sum.forwarded, st.Dropped, st.Alerts, sum.skipped+int(st.Undecodable))
	if len(st.UndecodableBy) > 0 {
		fmt.Fprintf(stderr, "ids: undecodable inner packets by reason: %v\n", st.UndecodableBy)
	}
	return 0
}

// reportRuleErrors prints every error of a rule file, then their count.
func reportRuleErrors(w io.Writer, file string, err error) {
	fmt.Fprintln(w, err)
	var el ids.ErrorList
	if errors.As(err, &el) {
		fmt.Fprintf(w, "ids: %d error(s) in %s\n", len(el), file)
	}
}

type summary struct{ packets, forwarded, skipped int }

// packetSource is what pcapgo's pcap and pcapng readers have in common.
type packetSource interface {
	ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	LinkType() layers.LinkType
}

func openCapture(f *os.File) (packetSource, error) {
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return nil, fmt.Errorf("read capture header: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint32(magic[:]) == 0x0a0d0d0a {
		return pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	}
	return pcapgo.NewReader(f)
}

func inspectCapture(e *ids.Engine, path string, argsBits int, out string) (summary, error) {
	var sum summary
	f, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	src, err := openCapture(f)
	if err != nil {
		return sum, fmt.Errorf("%s: %w", path, err)
	}
	var w *pcapgo.Writer
	if out != "" {
		of, err := os.Create(out)
		if err != nil {
			return sum, err
		}
		defer of.Close()
		w = pcapgo.NewWriter(of)
		if err := w.WriteFileHeader(65535, src.LinkType()); err != nil {
			return sum, err
		}
	}
	var p ids.Packet
	for {
		data, ci, err := src.ReadPacketData()
		if err == io.EOF {
			return sum, nil
		}
		if err != nil {
			return sum, fmt.Errorf("%s: packet %d: %w", path, sum.packets+1, err)
		}
		sum.packets++
		v := ids.Forward
		ip, ok := ipPayload(src.LinkType(), data)
		p.Time = ci.Timestamp
		if ok && ids.FromWire(ip, &p, argsBits) == nil {
			v = e.Inspect(&p)
		} else {
			sum.skipped++ // not IP, or an SRH we cannot decode: forwarded uninspected
		}
		if v == ids.Forward {
			sum.forwarded++
			if w != nil {
				if err := w.WritePacket(ci, data); err != nil {
					return sum, err
				}
			}
		}
	}
}

// ipPayload returns the IP packet of a captured frame.
func ipPayload(lt layers.LinkType, b []byte) ([]byte, bool) {
	var etype uint16
	switch lt {
	case layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6, 12: // 12: LINKTYPE_RAW on some systems
		return b, len(b) > 0
	case layers.LinkTypeEthernet:
		if len(b) < 14 {
			return nil, false
		}
		etype, b = binary.BigEndian.Uint16(b[12:14]), b[14:]
		for (etype == 0x8100 || etype == 0x88a8) && len(b) >= 4 {
			etype, b = binary.BigEndian.Uint16(b[2:4]), b[4:]
		}
	case layers.LinkTypeLinuxSLL:
		if len(b) < 16 {
			return nil, false
		}
		etype, b = binary.BigEndian.Uint16(b[14:16]), b[16:]
	case layers.LinkTypeLinuxSLL2:
		if len(b) < 20 {
			return nil, false
		}
		etype, b = binary.BigEndian.Uint16(b[0:2]), b[20:]
	default:
		return nil, false
	}
	return b, etype == 0x0800 || etype == 0x86dd
}
