// Command bpfconst writes the Go declarations of the constants an eBPF C
// program shares with its Go loader (drop reasons with their names,
// limits), so that the C source is their only definition. It runs from
// `go generate` (see the gen.go files); internal/bpfconst does the work.
//
//	bpfconst -src ../../bpf/fw_tc.bpf.c -ident fwTC -enum fw_drop_reason \
//	    -define FW_MAX_RULES=MaxRules -out fwtc_bpfconst.go
package main

import (
	"fmt"
	"os"

	"github.com/segchain/segchain/internal/bpfconst"
)

func main() {
	out, code, err := bpfconst.Generate(os.Args[1:], ".", os.Getenv("GOPACKAGE"))
	if err == nil {
		err = os.WriteFile(out, code, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bpfconst:", err)
		os.Exit(1)
	}
}
