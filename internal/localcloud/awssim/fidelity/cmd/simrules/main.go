// Command simrules prints the simulator's rules, one a line: name, the
// package of its test and the test's name (what `make sim-mutation` runs
// with the rule off).
package main

import (
	"fmt"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
)

func main() {
	for _, r := range fidelity.Rules() {
		fmt.Println(r.Name, r.Package, r.Test)
	}
}
