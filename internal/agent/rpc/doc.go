// Package rpc is what both ends of the agent's gRPC protocol share: the
// protocol version and message limit, the checks a server runs on the
// ops it receives (ValidateOps) and the HMAC secrets' typed fields beside
// the JSON payloads. The client a controller uses is
// internal/agent/rpc/client, the server `segchain agent` runs is
// internal/agent/rpc/server, the generated protobuf code is
// internal/agent/rpc/agentpb (proto/segchain/agent/v1, docs/agents.md).
package rpc
