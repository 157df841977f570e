// Package examples embeds the example domain files; Default is the built-in
// lab domain (the thesis' Figure 3.1) used when no file is given.
package examples

import _ "embed"

// Default is examples/default.yaml.
//
//go:embed default.yaml
var Default []byte
