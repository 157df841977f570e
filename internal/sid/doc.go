// Package sid is the SRv6 SID arithmetic of segchain: a SID is an IPv6
// address LOC:FUNCT:ARGS split by a Format, and Allocate assigns FUNCT values
// per node deterministically and stably (re-applying a file, or adding or
// removing another service, does not renumber a service).
package sid
