// Package plan is the controller's pure core: it turns a validated domain
// into the desired kernel state of every node (static routes, local SIDs,
// headend policies, classification rules, HMAC keys, sysctls) and the chain
// and SID tables that status and dump use to explain what they see. It does
// no I/O, so plans are compared against golden files.
package plan
