// Package srunaware implements the SR proxies for SR-unaware service functions
// (End.AS, End.AD/End.EAD with a per-SID or per-flow cache, End.AM) as one
// tc eBPF program, pinned per network namespace, plus the parser of their
// `segchain sid` syntax and a pure-Go reference model used to test the
// program.
package srunaware
