// Package lab brings up SRv6 test networks in Linux network namespaces: one
// namespace per node, veth pairs for links, addresses without DAD and static
// neighbours. Every lab is recorded in a state file under /run/segchain/labs
// before anything is created, so Down removes exactly what Up made and nothing
// else, even after a crash.
package lab
