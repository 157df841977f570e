package examples

import _ "embed"

// Default is examples/default.yaml, the built-in lab domain.
//
//go:embed default.yaml
var Default []byte
