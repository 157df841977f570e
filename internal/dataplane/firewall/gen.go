package firewall

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu" -target bpfel -type fw_inst -type fw_sid_key -type fw_table -type fw_rule -type fw_bitmap -type fw_lpm_key -type fw_args_key -type fw_stats -type fw_counter -type fw_ratelimit -type fw_field -type fw_action -type fw_drop_reason fwTC ../../../bpf/fw_tc.bpf.c
//go:generate go run github.com/segchain/segchain/cmd/bpfconst -src ../../../bpf/fw_tc.bpf.c -ident fwTC -enum fw_drop_reason -define FW_MAX_RULES=MaxRules,FW_MAX_INSTANCES=MaxInstances,FW_MAX_BITMAPS=maxBitmaps,FW_MAX_BLOCKS=maxBlocks,FW_DIRECT=direct,FW_ARGS_MAX=maxArgs -out fwtc_bpfconst.go
