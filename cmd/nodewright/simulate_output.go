package main

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/simulation"
)

// simulateOutputs are simulate's -o values.
var simulateOutputs = []string{"table", "json", "yaml", "html"}

// writeSimulation prints the plan in format, then fails with exit code 3
// when it leaves pods unschedulable (after printing: the plan is the
// evidence CI shows).
func writeSimulation(w io.Writer, format string, cat *catalog.Catalog, out simulation.Output) error {
	var err error
	switch format {
	case "json", "yaml":
		var data []byte
		if data, err = json.MarshalIndent(out, "", "  "); err != nil {
			return fmt.Errorf("encode the plan: %w", err)
		}
		if format == "yaml" {
			if data, err = yaml.JSONToYAML(data); err != nil {
				return fmt.Errorf("encode the plan as yaml: %w", err)
			}
		} else {
			data = append(data, '\n')
		}
		_, err = w.Write(data)
	case "html":
		err = simulation.WriteHTML(w, out, cat)
	default:
		err = simulation.WriteTable(w, out, cat)
	}
	if err != nil {
		return err
	}
	if n := len(out.Unschedulable); n > 0 {
		return &exitError{code: exitUnschedulable, err: fmt.Errorf("%d pod(s) unschedulable", n)}
	}
	return nil
}
