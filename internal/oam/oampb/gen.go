// Package oampb is the generated protobuf and gRPC code of the OAM
// service agents serve for segchain trace (proto/segchain/oam/v1/oam.proto).
// Do not edit: run make generate.
package oampb

//go:generate protoc -I ../../../proto --go_out=. --go_opt=module=github.com/segchain/segchain/internal/oam/oampb --go-grpc_out=. --go-grpc_opt=module=github.com/segchain/segchain/internal/oam/oampb segchain/oam/v1/oam.proto
