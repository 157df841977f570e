// Package service is the seam for service kinds (SR proxies, the SR-aware
// firewall, and the kinds to come): each kind is one package implementing
// Kind, its intent half (config block, validation, plan, canonical text),
// and listed once in internal/service/kinds. Its node half lives with its
// data path and is listed once in internal/agent/local. docs/extending.md
// walks through adding one.
package service
