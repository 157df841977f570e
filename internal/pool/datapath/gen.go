package datapath

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu" -target bpfel -type pool_inst -type pool_slot -type pool_conf -type pool_stats -type pool_drop_reason -type pool_flags -type pool_flow_key -type pool_moved_val -type pool_rule -type pool_ruleset -type pool_rule_flags poolTC ../../../bpf/pool_tc.bpf.c
//go:generate go run github.com/segchain/segchain/cmd/bpfconst -src ../../../bpf/pool_tc.bpf.c -ident poolTC -enum pool_drop_reason -out pooltc_bpfconst.go
