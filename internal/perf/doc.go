// Package perf is segchain's SRv6 benchmark framework (after SRPerf): testbed
// drivers (a built-in tester ⇄ SUT netns pair driven by an XDP live-frames
// generator), one configuration recipe per behaviour, trials, the PDR/NDR
// search, sandwich-interleaved saturated measurements with an A/A control,
// statistics and reports (JSON, CSV, Markdown, plots).
package perf
