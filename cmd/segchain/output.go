package main

import (
	"encoding/json"
	"fmt"
	"io"
)

// checkOutput validates an -o value: every read command prints text for
// people and JSON for programs.
func checkOutput(o string) error {
	if o != "text" && o != "json" {
		return fmt.Errorf("output format %q: want text or json", o)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
