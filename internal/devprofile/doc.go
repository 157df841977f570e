// Package devprofile writes CPU and heap profiles of a segchain process
// when SEGCHAIN_CPUPROFILE names a directory: a developer's aid for
// measuring the control plane (docs/benchmarks.md), off by default.
package devprofile
