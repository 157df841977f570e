// Package netfilter_test holds End.AN.NF's end-to-end tests: a domain
// file with a netfilter service applied to a lab.
package netfilter_test
