// Package agenttest is the one in-memory agent.Agent (Agent) and
// agent.Journal (Journal) every test uses instead of a node: Agent keeps
// a node's state as plain data and applies ops to it the way the kernel
// would (an owner is not kept, a failure can be injected), Journal keeps
// each node's ops as the on-disk journal does. Tests that need one more
// behaviour (a capability, a slow or dying agent) wrap them.
package agenttest
