// Package pki is a segchain domain's small certificate authority and the
// mutual-TLS configurations of agents and controllers: ECDSA P-256
// certificates whose role (node or controller) and name are a URI SAN,
// segchain://node/NAME or segchain://controller/NAME (docs/agents.md).
package pki
