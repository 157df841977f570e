// Package usvcperf adds the userspace SR-aware services (pkg/srv6svc) to
// `segchain perf`: a no-op service in synchronous and batched mode and a
// no-op End.ASM function, compared with native End and with the NFQUEUE
// accept-all reader (examples/perf/userspace.yaml).
package usvcperf
