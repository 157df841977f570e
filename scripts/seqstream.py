#!/usr/bin/env python3
"""Sequence-numbered UDP stream: count lost and duplicated packets.

  seqstream.py recv PORT [--idle S] [--ready FILE] [--until-signal]
      binds [::]:PORT, prints one JSON line when no packet came for S
      seconds after the first one (or --first S before it): received, unique,
      lost (gaps up to the highest sequence number seen, plus the tail
      announced by the sender's last packet), duplicates, reordered, the
      longest run of consecutive lost sequence numbers, the highest
      sequence number received (last) and the five longest gaps as
      [first lost sequence number, length]. With --until-signal a gap of any
      length does not end it: it waits for SIGUSR1 (the sender is done)
      and stops once no packet came for S seconds after that.
  seqstream.py send DST PORT --count N --rate PPS [--progress FILE] [--hold FILE]
      sends N datagrams of 64 bytes, the first 8 bytes the sequence
      number (big endian), the next 8 the total count, paced at PPS. With
      --progress, FILE (8 bytes, created by the caller) holds the number of
      datagrams sent so far (big endian), updated after each one through a
      shared mapping: the caller reads it before and after a change to
      prove the change happened while the stream was flowing. With
      --hold FILE the stream does not end while FILE exists: it keeps
      going (each packet announcing the grown total) until the caller
      removes FILE, then sends at least a tenth of N more.

The receiver knows the total from every packet, so packets lost at the
end of the stream are counted too. No timing is asserted: pacing only
sets the load."""
import argparse, json, mmap, os, signal, socket, struct, sys, time

def recv(a):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("::", a.port))
    # With --until-signal, the idle timeout only counts once the sender
    # is done: a failover's gap, however long, is counted as loss instead
    # of ending the count.
    done = [not a.until_signal]
    if a.until_signal:
        signal.signal(signal.SIGUSR1, lambda *_: done.__setitem__(0, True))
    if a.ready:
        open(a.ready, "w").write("ready\n")
    seen = {}
    total = 0
    last = -1
    reordered = 0
    first = True
    while True:
        s.settimeout((a.first if first else a.idle) if done[0] else 0.1)
        try:
            b = s.recv(2048)
        except socket.timeout:
            if done[0]:
                break
            continue
        first = False
        if len(b) < 16:
            continue
        seq, tot = struct.unpack("!QQ", b[:16])
        total = max(total, tot)
        seen[seq] = seen.get(seq, 0) + 1
        if seq < last:
            reordered += 1
        last = max(last, seq)
    unique = len(seen)
    dups = sum(v - 1 for v in seen.values())
    top = max(total, (max(seen) + 1) if seen else 0)
    lost = top - unique
    # Every run of consecutive lost sequence numbers: [first, length].
    gaps = []
    for i in range(top):
        if i in seen:
            continue
        if gaps and gaps[-1][0] + gaps[-1][1] == i:
            gaps[-1][1] += 1
        else:
            gaps.append([i, 1])
    best = max((g[1] for g in gaps), default=0)
    print(json.dumps({"sent": top, "received": sum(seen.values()), "unique": unique,
                      "lost": lost, "duplicates": dups, "reordered": reordered,
                      "longest_gap": best, "last": last,
                      "gaps": sorted(gaps, key=lambda g: -g[1])[:5]}), flush=True)

def send(a):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    pad = b"\0" * 48
    progress = None
    if a.progress:
        with open(a.progress, "r+b") as f:
            progress = mmap.mmap(f.fileno(), 8)
    start = time.monotonic()
    total, tail = a.count, max(1, a.count // 10)
    i = 0
    while i < total:
        # --hold: while FILE exists (the caller's change still runs) the
        # stream never gets within a tail of its end; each packet
        # announces the total as it stands, the receiver keeps the largest.
        if a.hold and total - i <= tail and os.path.exists(a.hold):
            total += tail
        due = start + i / a.rate
        d = due - time.monotonic()
        if d > 0:
            time.sleep(d)
        try:
            s.sendto(struct.pack("!QQ", i, total) + pad, (a.dst, a.port))
        except OSError:
            pass  # no route for a moment: that packet is lost, count it at the receiver
        i += 1
        if progress is not None:
            struct.pack_into("!Q", progress, 0, i)

def main():
    p = argparse.ArgumentParser()
    sp = p.add_subparsers(dest="cmd", required=True)
    r = sp.add_parser("recv"); r.add_argument("port", type=int)
    r.add_argument("--idle", type=float, default=1.0)
    r.add_argument("--first", type=float, default=30.0)
    r.add_argument("--ready")
    r.add_argument("--until-signal", action="store_true")
    w = sp.add_parser("send"); w.add_argument("dst"); w.add_argument("port", type=int)
    w.add_argument("--count", type=int, required=True); w.add_argument("--rate", type=float, default=1000)
    w.add_argument("--progress"); w.add_argument("--hold")
    a = p.parse_args()
    (recv if a.cmd == "recv" else send)(a)

if __name__ == "__main__":
    main()
