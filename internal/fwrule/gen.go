package fwrule

//go:generate go run github.com/segchain/segchain/cmd/bpfconst -src ../../bpf/fw_tc.bpf.c -define FW_EXT_MAX=MaxExtHeaders -out fwtc_bpfconst.go
