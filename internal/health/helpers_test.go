package health

import "net/netip"

type netipAddr = netip.Addr

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func addrAt(b []byte, off int) netip.Addr { return netip.AddrFrom16([16]byte(b[off : off+16])) }
