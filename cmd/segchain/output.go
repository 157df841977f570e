package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// checkOutput validates an -o value: every read command prints text for
// people and JSON for programs. "table" (perf's former name for its
// Markdown text) is accepted as an alias of text.
func checkOutput(o string) error {
	if o != "text" && o != "table" && o != "json" {
		return fmt.Errorf("output format %q: want text or json", o)
	}
	return nil
}

// normalizeOutput runs before every verb (root's PersistentPreRunE): the
// one place where -o is checked, and where the alias table becomes text, so
// that every verb takes the same values.
func normalizeOutput(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags().Lookup("output")
	if f == nil {
		return nil
	}
	if err := checkOutput(f.Value.String()); err != nil {
		return err
	}
	if f.Value.String() == "table" {
		return f.Value.Set("text")
	}
	return nil
}

// outputFlag registers -o/--output with the values every verb takes.
func outputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "text", "output format: text or json")
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
