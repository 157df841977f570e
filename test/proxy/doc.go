// Package proxy holds the namespace integration tests of segchain's SR
// proxies: real SR-unaware SFs (nftables firewall and NAT, nginx, an nft
// inspector) behind End.AD, End.AS and End.AM, with scapy-crafted traffic
// and tcpdump/tshark captures on both sides of the SF.
package proxy
