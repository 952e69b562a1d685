package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localrun"
)

// newLocalFaultCmds are the fault buttons: they ask the running `local up
// --config` (through the control endpoint in its state file) to make the
// simulator do what EC2 does to instances and capacity pools.
func newLocalFaultCmds() []*cobra.Command {
	var forDur time.Duration
	var capacityType string
	ice := faultCmd("ice TYPE ZONE", "Make a capacity pool answer InsufficientInstanceCapacity (for --for, else until up stops)", 2,
		func(args []string) (localrun.Fault, error) {
			return localrun.Fault{Action: "ice", Type: args[0], Zone: args[1], For: forDur, CapacityType: capacityType}, nil
		})
	ice.Flags().DurationVar(&forDur, "for", 0, "how long the pool stays out of capacity (default: until `local up` stops)")
	ice.Flags().StringVar(&capacityType, "capacity-type", "", "spot or on-demand (default both)")
	return []*cobra.Command{
		faultCmd("spot-interrupt NODE", "Send a spot interruption warning for a node (or instance ID); EC2 reclaims it two minutes later", 1,
			func(args []string) (localrun.Fault, error) {
				return localrun.Fault{Action: "spot-interrupt", Node: args[0]}, nil
			}),
		faultCmd("rebalance NODE", "Send an EC2 rebalance recommendation for a node (or instance ID)", 1,
			func(args []string) (localrun.Fault, error) {
				return localrun.Fault{Action: "rebalance", Node: args[0]}, nil
			}),
		ice,
		faultCmd("price TYPE ZONE PRICE", "Set the spot price of a pool (dollars per hour)", 3,
			func(args []string) (localrun.Fault, error) {
				p, err := strconv.ParseFloat(args[2], 64)
				if err != nil {
					return localrun.Fault{}, usageError(fmt.Errorf("price %q: %w", args[2], err))
				}
				return localrun.Fault{Action: "price", Type: args[0], Zone: args[1], Price: p}, nil
			}),
	}
}

func faultCmd(use, short string, nargs int, build func(args []string) (localrun.Fault, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short + " (needs `local up --config`)",
		Args:  cobra.ExactArgs(nargs),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := build(args)
			if err != nil {
				return err
			}
			st, err := localcloud.LoadState()
			if err != nil {
				return err
			}
			if st.Control == "" {
				return errors.New("the running local cloud runs no nodewright: start it with `nodewright local up --config DIR`")
			}
			msg, err := localrun.Press(cmd.Context(), st.Control, f)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
}
