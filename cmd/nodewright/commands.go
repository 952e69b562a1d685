package main

import "github.com/spf13/cobra"

// subcommands lists the CLI's commands; each lives in its own file.
func subcommands() []*cobra.Command {
	return []*cobra.Command{
		newValidateCmd(),
		newSimulateCmd(),
		newLocalCmd(),
		newDemoCmd(),
		newGetCmd(),
		newDescribeCmd(),
		newDeleteCmd(),
		newImportCmd(),
		newReportCmd(),
		newDoctorCmd(),
	}
}
