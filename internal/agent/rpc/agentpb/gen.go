// Package agentpb is the generated protobuf and gRPC code of the agent
// protocol (proto/segchain/agent/v1/agent.proto). Do not edit: run
// make generate.
package agentpb

// protoc comes from Debian's protobuf-compiler; the plugins are pinned in
// scripts/deps.sh (protoc-gen-go v1.36.6, protoc-gen-go-grpc v1.5.1).
//go:generate protoc -I ../../../../proto --go_out=. --go_opt=module=github.com/segchain/segchain/internal/agent/rpc/agentpb --go-grpc_out=. --go-grpc_opt=module=github.com/segchain/segchain/internal/agent/rpc/agentpb segchain/agent/v1/agent.proto
