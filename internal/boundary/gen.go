package boundary

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -target bpf -I/usr/include/x86_64-linux-gnu" -target bpfel -type bnd_key -type bnd_dest -type bnd_ctr_key -type bnd_ctr -type bnd_kind -type bnd_drop_reason -type bnd_sample_cfg -type bnd_sample_ctr -type bnd_sample_event boundaryTC ../../bpf/boundary_tc.bpf.c
//go:generate go run github.com/segchain/segchain/cmd/bpfconst -src ../../bpf/boundary_tc.bpf.c -ident boundaryTC -enum bnd_drop_reason -out boundarytc_bpfconst.go
