package dump

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Config is one dump session.
type Config struct {
	Source  Source
	Printer Printer
	Filter  Filter
	// Out receives the rendering; nil prints nothing.
	Out io.Writer
	// PcapOut, if not nil, receives every matching frame as a pcap file.
	PcapOut io.Writer
	// Count stops after that many matching packets (0: no limit).
	Count int
	// Snaplen keeps only that many octets of each frame, as tcpdump -s
	// (0: all of it).
	Snaplen int
	// Extras are tcpdump's -e, -X and -A for the text renderings.
	Extras Extras
}

// Stats counts what a session saw.
type Stats struct {
	Seen      int // frames read
	Matched   int // frames that passed the filter
	Malformed int // matched frames with a decode error
}

// Run reads cfg.Source until EOF, cancellation or cfg.Count matches.
func Run(ctx context.Context, cfg Config) (Stats, error) {
	var st Stats
	var out *bufio.Writer
	if cfg.Out != nil {
		out = bufio.NewWriterSize(cfg.Out, 256<<10)
		defer out.Flush()
	}
	var pw *pcapgo.Writer
	var pbuf *bufio.Writer
	if cfg.PcapOut != nil {
		pbuf = bufio.NewWriterSize(cfg.PcapOut, 256<<10)
		defer pbuf.Flush()
		pw = pcapgo.NewWriter(pbuf)
		snap := uint32(262144)
		if cfg.Snaplen > 0 {
			snap = uint32(cfg.Snaplen)
		}
		if err := pw.WriteFileHeader(snap, layers.LinkType(cfg.Source.LinkType())); err != nil {
			return st, fmt.Errorf("write pcap header: %w", err)
		}
	}
	link := cfg.Source.LinkType()
	_, live := cfg.Source.(*liveSource) // live: show each packet as it comes
	var r Record
	buf := make([]byte, 0, 64<<10)
	for cfg.Count <= 0 || st.Matched < cfg.Count {
		data, ci, err := cfg.Source.Next(ctx)
		if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read packet %d: %w", st.Seen+1, err)
		}
		st.Seen++
		if cfg.Snaplen > 0 && len(data) > cfg.Snaplen {
			data, ci.CapLen = data[:cfg.Snaplen], cfg.Snaplen
		}
		r.Time, r.CapLen, r.OrigLen = ci.Time, ci.CapLen, ci.Len
		r.Decode(link, data)
		if !cfg.Filter.Match(&r) {
			continue
		}
		st.Matched++
		if r.Err != nil {
			st.Malformed++
		}
		if pw != nil {
			if err := pw.WritePacket(gopacket.CaptureInfo{Timestamp: ci.Time, CaptureLength: len(data), Length: ci.Len}, data); err != nil {
				return st, fmt.Errorf("write pcap: %w", err)
			}
		}
		if out != nil {
			buf = cfg.Extras.Prefix(buf[:0], &r)
			buf = cfg.Printer.Append(buf, &r)
			buf = cfg.Extras.Suffix(buf, &r)
			if _, err := out.Write(buf); err != nil {
				return st, fmt.Errorf("write output: %w", err)
			}
			if live {
				if err := out.Flush(); err != nil {
					return st, fmt.Errorf("write output: %w", err)
				}
			}
		}
	}
	return st, nil
}
