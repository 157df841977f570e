package perf

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu -I../../bpf/include" -target bpfel -type perf_tmpl -type perf_gen_ctl -type perf_gen_count -type perf_gen_verdict -type perf_gen_flags perfGen ../../bpf/perf_gen.bpf.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu -I../../bpf/include" -target bpfel -type perf_sink_count -type perf_lat_hist -type perf_lat_miss_reason -type perf_stamp perfSinkTC ../../bpf/perf_sink_tc.bpf.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu -I../../bpf/include" -target bpfel perfSinkXDP ../../bpf/perf_sink_xdp.bpf.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu -I../../bpf/include" -target bpfel perfEndBPF ../../bpf/perf_endbpf.bpf.c
//go:generate go run github.com/segchain/segchain/cmd/bpfconst -src ../../bpf/include/perf_lat.h -define PERF_STAMP_LEN=stampLen,PERF_STAMP_MAGIC=stampMagic,PERF_LAT_SUB_BITS=latSubBits,PERF_LAT_MAX_BITS=latMaxBits,PERF_LAT_SLOTS=latSlots -out perflat_bpfconst.go
