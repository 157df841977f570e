package config

import (
	"errors"

	goyaml "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// syntaxPosition returns the line and column where YAML parsing stopped in
// data, or 0, 0 when it cannot tell. yaml.v3 (which decodes domain files)
// reports a syntax error at the start of the enclosing construct, one line
// early and without a column; a second parser that keeps the offending
// token's position says where the error is.
func syntaxPosition(data []byte) (line, col int) {
	_, err := parser.ParseBytes(data, 0)
	var se *goyaml.SyntaxError
	if errors.As(err, &se) && se.Token != nil && se.Token.Position != nil {
		return se.Token.Position.Line, se.Token.Position.Column
	}
	return 0, 0
}
