package fw

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu" -target bpfel -type fw_inst -type fw_sid_key -type fw_table -type fw_rule -type fw_bitmap -type fw_lpm_key -type fw_args_key -type fw_stats -type fw_counter -type fw_ratelimit -type fw_field -type fw_action -type fw_drop_reason fwTC ../../bpf/fw_tc.bpf.c
