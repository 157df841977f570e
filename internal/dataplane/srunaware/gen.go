package srunaware

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu" -target bpfel -type proxy_sid -type proxy_cache -type proxy_flow_key -type proxy_stats -type proxy_drop_reason -type proxy_behavior -type proxy_inner proxyTC ../../../bpf/proxy_tc.bpf.c
//go:generate go run github.com/segchain/segchain/cmd/bpfconst -src ../../../bpf/proxy_tc.bpf.c -ident proxyTC -enum proxy_drop_reason -define PROXY_FLOWS_MAX=flowsMax -out proxytc_bpfconst.go
