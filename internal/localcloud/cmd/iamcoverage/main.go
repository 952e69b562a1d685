// Command iamcoverage reports which statements of the stack's IAM policies
// the test suite exercised. Every test package running a local cloud under
// IAM enforcement writes the statements its calls used into
// $NODEWRIGHT_IAM_COVERAGE_DIR (one JSON file per package); this command
// merges them and fails when an Allow statement of a function role allowed
// no call: such a statement is either unnecessary (least privilege: remove
// it) or a gap in the tests (add one).
//
//	go run ./internal/localcloud/cmd/iamcoverage DIR
//	go run ./internal/localcloud/cmd/iamcoverage -statements ControllerRole RegistrarRole
//
// The second form lists the IDs of the roles' Allow statements in the
// synthesized template, one per line, for the mutation test (`make
// iam-mutation`), which drops each in turn (localcloud.EnvIAMDrop).
//
// Statements whose every action is CloudWatch Logs are used by the Lambda
// service on the function's behalf, which the local cloud does not run; they
// are listed, not counted.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-statements" {
		if err := listStatements(os.Stdout, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "iamcoverage:", err)
			os.Exit(2)
		}
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: iamcoverage DIR | iamcoverage -statements ROLE...")
		os.Exit(2)
	}
	uses, err := read(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "iamcoverage:", err)
		os.Exit(2)
	}
	if unused := report(os.Stdout, uses); unused > 0 {
		fmt.Fprintf(os.Stderr, "iamcoverage: %d Allow statements allowed no call: remove them or add the test that needs them\n", unused)
		os.Exit(1)
	}
}

// read merges every package's report: a statement's count is the sum.
func read(dir string) (map[string]awssim.StatementUse, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no reports in %s (did the tests run with %s set?)", dir, "NODEWRIGHT_IAM_COVERAGE_DIR")
	}
	merged := map[string]awssim.StatementUse{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var uses []awssim.StatementUse
		if err := json.Unmarshal(b, &uses); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, u := range uses {
			k := u.Role + "\x00" + u.Statement
			m := merged[k]
			u.Allowed += m.Allowed
			u.Used = union(u.Used, m.Used)
			merged[k] = u
		}
	}
	return merged, nil
}

// report prints one line per statement and returns how many Allow
// statements nothing used.
func report(w io.Writer, uses map[string]awssim.StatementUse) int {
	keys := make([]string, 0, len(uses))
	for k := range uses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	unused := 0
	for _, k := range keys {
		u := uses[k]
		role := u.Role[strings.LastIndex(u.Role, "/")+1:]
		status := fmt.Sprintf("%6d calls", u.Allowed)
		switch {
		case !u.Allow:
			status = "  deny      "
		case lambdaOnly(u.Actions):
			status = "  by Lambda "
		case u.Allowed == 0:
			status = "  UNUSED    "
			unused++
		}
		fmt.Fprintf(w, "%s  %-22s %s  [%s]\n", status, role, u.Statement, strings.Join(u.Actions, " "))
		if idle := idleActions(u); u.Allow && u.Allowed > 0 && len(idle) > 0 {
			fmt.Fprintf(w, "              no call used: %s\n", strings.Join(idle, " "))
		}
	}
	return unused
}

// idleActions are the actions of a used statement no call needed: listed,
// not failed, as some are the Lambda service's (an SQS event source's
// GetQueueAttributes, ChangeMessageVisibility), which the local cloud does
// not run.
func idleActions(u awssim.StatementUse) []string {
	var out []string
	for _, a := range u.Actions {
		if !strings.Contains(a, "*") && !slices.ContainsFunc(u.Used, func(x string) bool { return strings.EqualFold(x, a) }) {
			out = append(out, a)
		}
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// lambdaOnly: the Lambda service writes the function's logs with the role.
func lambdaOnly(actions []string) bool {
	for _, a := range actions {
		if !strings.HasPrefix(a, "logs:") {
			return false
		}
	}
	return len(actions) > 0
}

// listStatements prints the Allow statements (not the Lambda-only ones) of
// the given roles of the synthesized template.
func listStatements(w io.Writer, roles []string) error {
	tpl, err := localcloud.IAMTemplate(context.Background())
	if err != nil {
		return err
	}
	b := iam.Binding{Partition: "aws", Region: "us-west-2", Account: awssim.DefaultAccountID, StackName: "nodewright-list"}
	for _, role := range roles {
		policies, err := tpl.RolePolicies(role, b)
		if err != nil {
			return err
		}
		for _, p := range policies {
			for _, st := range p.Statements {
				if st.Allow && !lambdaOnly(st.Action) {
					id, _, _ := strings.Cut(st.ID, " ")
					fmt.Fprintln(w, id)
				}
			}
		}
	}
	return nil
}
