// Package nfperf holds End.AN.NF's recipes for `segchain perf`: End.AN.NF
// itself and the stock-Linux paths it is compared with (native End and
// End.DT6 + H.Encaps), each behind the same number of nftables rules.
package nfperf
