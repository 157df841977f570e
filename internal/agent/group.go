package agent

// GroupNode is one node a group process serves (the --nodes file is a
// JSON list of them).
type GroupNode struct {
	// Node is the node's name (its certificate node-NODE.crt in --pki).
	Node string `json:"node"`
	// Netns is the node's network namespace.
	Netns string `json:"netns"`
	// Listen is the gRPC address, in the group process's own namespace
	// (port 0: any; the address taken is written to --ready).
	Listen string `json:"listen"`
	// StateDir keeps the node's journal and intent.
	StateDir string `json:"state_dir"`
}
