// Package srv6svc lets a Go program serve SRv6 SIDs in userspace: an
// SR-aware service binds a SID (or a SID prefix whose low bits are ARGS),
// receives every packet whose active segment is that SID with its metadata
// parsed (outer IPv6 header, SRH fields, segment list, TLVs, ARGS, the inner
// packet), and answers each with a verdict: Forward (End), Drop, SkipNext,
// GoLast, after optionally changing the inner packet (SetInner,
// MarkInnerModified: lengths and checksums are fixed by the library;
// SetPayload for opaque bytes) or the SRH (SetTag, SetFlags,
// SetSegmentsLeft, SetSegment, SetNextSegments, AddTLV, RemoveTLVs,
// SignHMAC, RemoveHMAC: the headers read with Outer and SRH are copies).
// Inner TCP/UDP checksums a sending host left partial (checksum offload)
// are completed before the handler sees the packet.
//
// A binding of compressed SIDs (Config.CSID = F3216, RFC 9800 NEXT-C-SID)
// gets its uSID whatever uSIDs follow it in the container, with or without
// an SRH (HasSRH, CSIDFollows); Forward then shifts the container, and the
// next segment follows only when the container is consumed (docs/usid.md).
//
// Test a handler without root with srv6svctest; srv6svc/svcflags has the
// flags every service binary shares. Errors are typed: ErrConfig
// (*ConfigError), ErrConflict, ErrBadSRH, ErrTooLong.
//
// A service is a plain function:
//
//	svc, err := srv6svc.Listen(srv6svc.Config{Name: "ids", SIDs: sids, Interfaces: []string{"eth0"}})
//	err = svc.Serve(ctx, func(p *srv6svc.Packet) srv6svc.Verdict { ... })
//
// Serve calls the handler one packet at a time (synchronous mode);
// ServeBatch hands over batches (asynchronous batched mode); ServeASM runs
// an SR-unaware function as End.ASM, the shared-memory SR proxy, which sees
// only the inner packet.
//
// Data path: an XDP program on the interfaces steers only the bound SIDs'
// packets (an LPM map) to the service's AF_XDP socket on the receiving
// queue, one worker per queue; all other traffic stays on the kernel path.
// A processed frame is sent, from the same UMEM chunk, on a loop veth whose
// peer is in the node's stack, which routes it to its next segment (local
// or not). The modes obtained (XDP native or generic, AF_XDP zero-copy or
// copy; veth only has copy) are reported by Mode and `segchain sid show`,
// never chosen silently. When the process dies the kernel removes its
// sockets from the map and the SID's on-failure policy applies (drop, or
// bypass: the kernel's End route forwards the packets), counted, until a
// process binds again. See docs/userspace.md.
package srv6svc
