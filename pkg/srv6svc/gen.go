package srv6svc

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu" -target bpfel -type svc_key -type svc_val -type svc_stats -type svc_info steerXDP ../../bpf/srv6svc_xdp.bpf.c
//go:generate go run github.com/segchain/segchain/cmd/bpfconst -src ../../bpf/lib/ipv6.h -define IPV6_EXT_MAX=maxExtHeaders -out ipv6_bpfconst.go
