package fwrule

//go:generate go run github.com/segchain/segchain/cmd/bpfconst -src ../../bpf/lib/ipv6.h -define IPV6_EXT_MAX=MaxExtHeaders -out ipv6_bpfconst.go
