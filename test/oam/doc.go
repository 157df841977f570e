// Package oam_test traces the default lab's chains with segchain trace
// (internal/oam) and breaks one hop at a time (an SF's interface down, a
// route deleted, an nftables rule dropping the probe's flow) to check that
// the trace names exactly that hop.
package oam_test
