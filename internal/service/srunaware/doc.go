// Package srunaware is the intent half of the sr-unaware service kind: an
// SR-unaware service function behind an SR proxy (End.AS, End.AD, End.AM).
// It holds the proxy's configuration fields, the proxy spec and its
// `segchain sid add` syntax, and plans a service into a nodestate.Service;
// internal/dataplane/srunaware is its data path and node half. Pure data: no eBPF.
package srunaware
