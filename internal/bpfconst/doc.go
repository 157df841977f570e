// Package bpfconst keeps the facts the eBPF C programs and their Go loaders
// share in one place, the C source: it reads a program's drop-reason enum
// (numbers from the order of its enumerators, names from a quoted word at
// the start of each enumerator's comment) and chosen integer #defines, and
// renders the Go file that declares them. cmd/bpfconst runs it from
// `go generate`; `make check-generated` fails when the committed file and
// the C source disagree.
package bpfconst
