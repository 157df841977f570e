package netfilter

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu" -target bpfel -type nf_sid -type nf_sid_key -type nf_cfg -type nf_slot -type nf_stats -type nf_drop_reason -type nf_fib_ent nfTC ../../../bpf/nf_tc.bpf.c
//go:generate go run github.com/segchain/segchain/cmd/bpfconst -src ../../../bpf/nf_tc.bpf.c -ident nfTC -enum nf_drop_reason -define NF_MAX_SIDS=MaxSIDs,NF_SLOTS=numSlots,NF_HDR_MAX=MaxHeader -out nftc_bpfconst.go
