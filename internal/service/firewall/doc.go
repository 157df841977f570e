// Package firewall is the intent half of the firewall service kind, the
// SR-aware firewall End.AN.FW: its `firewall:` block (Config), the block
// resolved (Resolved) and the planned instance (Spec, a nodestate.Service's
// spec). internal/dataplane/firewall is its data path and node half (firewall.Instance installed,
// fw.Counters). Pure data: no eBPF.
package firewall
