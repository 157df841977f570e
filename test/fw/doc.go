// Package fw holds the privileged black-box tests of the SR-aware firewall
// (End.AN.FW, after SERA): a firewall SID is installed and its rules managed
// only through the segchain binary (`sid add ... End.AN.FW`, `fw add`,
// `fw import` ...), packets are crafted with scapy in a sender namespace and
// what leaves the firewall is captured with tcpdump in the next namespaces
// and read back with scapy and tshark.
package fw
