// Package dataplane reads and writes native SRv6 kernel state (seg6 and
// seg6local routes, policy rules, sysctls, the seg6 HMAC key table and the
// tunnel source) inside one network namespace through rtnetlink and the
// "SEG6" generic netlink family, and probes what the running kernel supports.
package dataplane
