package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// outputFlag is -o/--output of the list and describe commands: text (a
// table for people) or json (for scripts; field names are snake_case, times
// are milliseconds since the epoch or RFC 3339 strings, unknown values are
// null).
type outputFlag struct{ format string }

func addOutputFlag(cmd *cobra.Command) *outputFlag {
	o := &outputFlag{}
	cmd.Flags().StringVarP(&o.format, "output", "o", "text", "output format: text or json")
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if o.format != "text" && o.format != "json" {
			return fmt.Errorf("--output must be text or json, not %q", o.format)
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
	return o
}

func (o *outputFlag) json() bool { return o.format == "json" }

// writeJSON writes v as indented JSON. Lists are never null: a nil slice is
// written as [].
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
