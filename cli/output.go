package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Output formats every command that prints structured results accepts.
const (
	OutputTable = "table"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// printStructured writes v as JSON or YAML; table rendering stays with each command.
func printStructured(w io.Writer, format string, v any) error {
	switch format {
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case OutputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	default:
		return fmt.Errorf("unknown output format %q: use one of table, json, yaml", format)
	}
}

// checkOutput refuses an -o value no command prints.
func checkOutput(format string) error {
	switch format {
	case OutputTable, OutputJSON, OutputYAML:
		return nil
	}
	return fmt.Errorf("-o %s: use table, json or yaml", format)
}
