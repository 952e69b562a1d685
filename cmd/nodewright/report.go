package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/decision"
	"github.com/nodewright/nodewright/internal/store"
)

// Output formats of report.
const (
	reportTable = "table"
	reportJSON  = "json"
	reportHTML  = "html"
)

// reportOptions are report's flags.
type reportOptions struct {
	since  time.Duration
	output string
}

func (o *reportOptions) check() error {
	switch o.output {
	case "", reportTable, reportJSON, reportHTML:
	default:
		return usageError(fmt.Errorf("-o %q: want table, json or html", o.output))
	}
	if o.since <= 0 {
		return usageError(fmt.Errorf("--since %s: want a positive duration", o.since))
	}
	return nil
}

func newReportCmd() *cobra.Command {
	var tf tableFlags
	o := reportOptions{since: 24 * time.Hour}
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Summarize what nodewright decided in shadow mode",
		Long: `Report reads the decisions a stack deployed in shadow mode (-c mode=shadow)
recorded in its DynamoDB table over a window and prints what they add up to:

  - pending pods: how long they waited for a node (whoever launched it) against
    how long nodewright took to plan one
  - cost: what the fleet costs per hour against nodewright's plan for the same pods
  - the NodeClaims nodewright would have launched (type, zone, capacity type, $/h)
  - the top consolidation opportunities, nodes nodewright did not launch
    included, with the $/h each would save, and the nodes it would not disrupt
    and why (PDBs, do-not-disrupt, budgets)
  - the configuration it could not honour

-o html writes a self-contained page with a chart of actual against planned $/h.
The table is found as for 'get': --table, $NODEWRIGHT_TABLE_NAME, --stack or --cluster.`,
		Example: `  nodewright report --cluster prod
  nodewright report --cluster prod --since 72h -o json
  nodewright report --cluster prod -o html > report.html`,
		Args: noArgs,
		RunE: tableRun(&tf, o.check, func(ctx context.Context, cmd *cobra.Command, _ []string, st *store.Store, _ string) error {
			return runReport(ctx, cmd.OutOrStdout(), st, o, time.Now())
		}),
	}
	tf.register(cmd)
	cmd.Flags().DurationVar(&o.since, "since", o.since, "the window: records made this long before now")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: table, json, html (default: a table)")
	return cmd
}

// runReport reads the window's records and writes the report.
func runReport(ctx context.Context, w io.Writer, st *store.Store, o reportOptions, now time.Time) error {
	since := now.Add(-o.since)
	ds, err := st.ListDecisions(ctx, since)
	if err != nil {
		return err
	}
	recs, err := decision.Decode(ds)
	if err != nil {
		return err
	}
	rep := decision.Summarize(recs, since, now)
	switch o.output {
	case reportJSON:
		return decision.WriteJSON(w, rep)
	case reportHTML:
		return decision.WriteHTML(w, rep)
	}
	return decision.WriteTable(w, rep)
}
