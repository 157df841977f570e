package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/dump"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/plan"
)

type dumpFlags struct {
	iface, netns, labName string
	read, write           string
	count                 int
	output                string
	verbose, print        bool
	sid, inner, domain    string
	segleft, tag          int
	// tcpdump's everyday flags
	numeric int // -n / -nn: segchain never resolves names; accepted
	extras  dump.Extras
	snaplen int
}

func newDumpCmd() *cobra.Command {
	var f dumpFlags
	cmd := &cobra.Command{
		Use:   "dump [-i IFACE | -r FILE] [flags] [BPF-FILTER...]",
		Short: "Dissect SRv6 traffic: every SRH field, TLVs, SID structure, inner packet",
		Long: `dump prints SRv6 packets captured live (AF_PACKET) or read from a pcap/pcapng
file: the outer IPv6 header, the SRH (next header, hdr-len, segments left, last
entry, flags, tag), the segment list with the active segment marked (*) and
visited/remaining segments distinguished (-v), every TLV (Pad1, PadN, HMAC with
key id and D bit, unknown ones as type/length/hex) and the inner packet
(IPv6/IPv4/Ethernet; TCP/UDP/ICMP with ports and flags). Inner transport
checksums are verified: against Segment List[0] (the final destination) in
insert mode, against the inner header in encap mode. Malformed headers are
printed with the reason, never a crash.

Sources: -i IFACE (current namespace), --netns NAME -i IFACE, --lab NAME
-i NODE:IFACE, or -r FILE. Trailing arguments are a tcpdump filter expression,
compiled with tcpdump -dd (tcpdump is a dependency, installed by make deps,
needed only for a filter expression) and run in the kernel (live) or on each
frame (-r).
Times are UTC.

Output: one line per packet, -v a tree, -o json one object per line.
tcpdump's everyday flags work as there: -n/-nn (accepted: nothing is ever
resolved), -e (link-level header), -X (hex and ASCII), -A (ASCII), -s N
(snap length), -c N, -r, -w, -i.
-w FILE.pcap writes the matching frames (and prints nothing unless --print).

Annotation: --domain FILE annotates each SID with node, service, behaviour and
its LOC:FUNCT:ARGS structure; with --lab the lab's own domain file (or the
built-in default) is used unless --domain is given.

Examples:
  segchain dump -r trace.pcap -v
  segchain dump --lab default -i nfv1:eth-r1 --sid fc00:3::/48 -c 10
  segchain dump --netns sc-default-r1 -i eth-nfv1 --inner 'proto udp port 53' ip6
  segchain dump -r trace.pcapng -o json --segleft 0`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDump(cmd, f, strings.Join(args, " "))
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.iface, "interface", "i", "", "capture live on IFACE (NODE:IFACE with --lab)")
	fl.StringVar(&f.netns, "netns", "", "network namespace of the interface")
	fl.StringVar(&f.labName, "lab", "", "lab whose node owns the interface (-i NODE:IFACE)")
	fl.StringVarP(&f.read, "read", "r", "", "read a pcap or pcapng file")
	fl.StringVarP(&f.write, "write", "w", "", "write matching frames to a pcap file")
	fl.BoolVar(&f.print, "print", false, "with -w, also print the packets")
	fl.IntVarP(&f.count, "count", "c", 0, "stop after N matching packets")
	outputFlag(cmd, &f.output)
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "detailed tree (text output)")
	fl.StringVar(&f.sid, "sid", "", "only packets whose segment list or destination contains ADDR (or PREFIX)")
	fl.IntVar(&f.segleft, "segleft", -1, "only packets with this Segments Left")
	fl.IntVar(&f.tag, "tag", -1, "only packets with this SRH tag")
	fl.StringVar(&f.inner, "inner", "", "inner packet filter: 'src A dst B proto P port N' (parts optional)")
	fl.StringVar(&f.domain, "domain", "", "domain file: annotate SIDs with node, service, behaviour, ARGS")
	fl.CountVarP(&f.numeric, "numeric", "n", "as tcpdump -n/-nn: accepted; addresses and ports are always numeric")
	fl.BoolVarP(&f.extras.LinkHeader, "link-header", "e", false, "as tcpdump -e: print the link-level header (MACs, ethertype)")
	fl.BoolVarP(&f.extras.Hex, "hex", "X", false, "as tcpdump -X: hex and ASCII dump of each packet (from the network header)")
	fl.BoolVarP(&f.extras.ASCII, "ascii", "A", false, "as tcpdump -A: ASCII dump of each packet")
	fl.IntVarP(&f.snaplen, "snaplen", "s", 0, "as tcpdump -s: keep only the first N octets of each frame (0: all)")
	return cmd
}

func runDump(cmd *cobra.Command, f dumpFlags, bpfExpr string) error {
	if (f.read == "") == (f.iface == "") {
		return errors.New("dump: give exactly one of -i IFACE or -r FILE")
	}
	pr := dump.Printer{Format: dump.FormatLine}
	switch f.output {
	case "text":
		if f.verbose {
			pr.Format = dump.FormatTree
		}
	case "json":
		pr.Format = dump.FormatJSON
	default:
		return fmt.Errorf("dump: -o %q: want text or json", f.output)
	}
	filter := dump.NewFilter()
	filter.SegLeft, filter.Tag = f.segleft, f.tag
	if f.sid != "" {
		p, err := dump.ParsePrefix(f.sid)
		if err != nil {
			return fmt.Errorf("dump: --sid: %w", err)
		}
		filter.SID = p
	}
	if f.inner != "" {
		m, err := dump.ParseInnerMatch(f.inner)
		if err != nil {
			return fmt.Errorf("dump: --inner: %w", err)
		}
		filter.Inner = m
	}
	if f.domain != "" {
		res, err := resolverFromDomain(f.domain)
		if err != nil {
			return fmt.Errorf("dump: --domain: %w", err)
		}
		pr.Resolver = res
	} else if f.labName != "" {
		// A running lab: annotate with the domain it was brought up from
		// (the built-in default when it has no file). Capture anyway if
		// that fails.
		if l, err := lab.Get(f.labName); err == nil {
			res, err := resolverFromDomain(l.File)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "segchain: dump: no SID annotation for lab %s: %v\n", f.labName, err)
			} else {
				pr.Resolver = res
			}
		}
	}

	var src dump.Source
	var err error
	if f.read != "" {
		if f.netns != "" || f.labName != "" {
			return errors.New("dump: --netns and --lab apply to live capture (-i)")
		}
		if src, err = dump.OpenFiltered(f.read, bpfExpr); err != nil {
			return fmt.Errorf("dump: %w", err)
		}
	} else {
		ns, iface, err := liveTarget(f)
		if err != nil {
			return err
		}
		if src, err = dump.OpenLiveFiltered(ns, iface, bpfExpr); err != nil {
			return fmt.Errorf("dump: %w", err)
		}
	}
	defer src.Close()

	cfg := dump.Config{Source: src, Printer: pr, Filter: filter, Count: f.count, Out: cmd.OutOrStdout(), Snaplen: f.snaplen}
	if pr.Format != dump.FormatJSON {
		cfg.Extras = f.extras
	}
	if f.write != "" {
		w, err := os.Create(f.write)
		if err != nil {
			return fmt.Errorf("dump: %w", err)
		}
		defer w.Close()
		cfg.PcapOut = w
		if !f.print {
			cfg.Out = nil
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := dump.Run(ctx, cfg)
	if f.read == "" || f.write != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "%d packets seen, %d matched, %d malformed\n", st.Seen, st.Matched, st.Malformed)
	}
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	return nil
}

// liveTarget resolves the namespace and interface of a live capture.
func liveTarget(f dumpFlags) (ns, iface string, err error) {
	if f.labName == "" {
		return f.netns, f.iface, nil
	}
	if f.netns != "" {
		return "", "", errors.New("dump: give --lab or --netns, not both")
	}
	node, ifc, ok := strings.Cut(f.iface, ":")
	if !ok || node == "" || ifc == "" {
		return "", "", fmt.Errorf("dump: with --lab, -i must be NODE:IFACE, got %q", f.iface)
	}
	l, err := getLab(f.labName)
	if err != nil {
		return "", "", fmt.Errorf("dump: %w", err)
	}
	if ns, err = l.Netns(node); err != nil {
		return "", "", fmt.Errorf("dump: %w", err)
	}
	return ns, ifc, nil
}

// resolverFromDomain builds the SID annotation table of a domain file (""
// is the built-in default domain, as for the other verbs).
// LEAD: this wires loadDomain + plan.Build (both exist now); adjust here if
// the plan's SIDInfo changes.
func resolverFromDomain(path string) (dump.SIDResolver, error) {
	d, err := loadDomain(path)
	if err != nil {
		return nil, err
	}
	p, err := plan.Build(d)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	infos := make([]dump.SIDInfo, 0, len(p.SIDs))
	for _, s := range p.SIDs {
		infos = append(infos, dump.SIDInfo{SID: s.SID, Node: s.Node, Service: s.Service, Behavior: s.Behavior,
			LocatorBits: s.LocatorBits, FunctionBits: s.FunctionBits, ArgsBits: s.Args})
		if f := d.USIDFormat(); d.Compressed() && f.Block.Contains(s.SID.Addr()) {
			infos[len(infos)-1].CSID = f
		}
	}
	return dump.NewTable(infos), nil
}
