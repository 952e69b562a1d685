package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/simulation"
)

// examplesDir holds the example configurations the README points users at.
var examplesDir = filepath.Join("..", "..", "infra", "examples")

// readmeSection returns the shell commands and the untagged output blocks of
// one "## " section of the README, in order.
func readmeSection(t *testing.T, heading string) (commands []string, outputs []string) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, fence, block := false, "", ""
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == heading
			continue
		}
		switch {
		case !in:
		case fence == "" && strings.HasPrefix(line, "```"):
			fence, block = line, ""
		case fence != "" && line == "```":
			if fence == "```" {
				outputs = append(outputs, block)
			}
			fence = ""
		case fence == "```sh":
			commands = append(commands, line)
		case fence != "":
			block += line + "\n"
		}
	}
	if len(commands) == 0 {
		t.Fatalf("README has no %q section with commands", heading)
	}
	return commands, outputs
}

// needAWS are the getting-started commands that only run against AWS or a
// cluster; the test runs every other line.
var needAWS = []string{"aws ", "go install ", "make build", "infra/synth.sh ", "infra/node_modules/.bin/cdk ",
	"kubectl ", "nodewright get ", "nodewright doctor ", "TABLE="}

// TestGettingStarted runs the README's "Getting started on AWS" as written,
// from a directory laid out like the repository, except the commands that
// need AWS (the build and deploy steps are run, up to their synth, by
// infra's TestDeployPath; `get nodeclaims -w`
// against a local DynamoDB by TestGetAndDescribeOnDynalite): it sets the
// exported variables, runs the shell steps that write files, runs each
// nodewright command through the CLI, and checks that every output block of
// the section is what the command before it printed.
func TestGettingStarted(t *testing.T) {
	noAWS(t)
	for _, tool := range []string{"sh", "envsubst", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH: %v", tool, err)
		}
	}
	infra, err := filepath.Abs(filepath.Join("..", "..", "infra"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(infra, filepath.Join(dir, "infra")); err != nil {
		t.Fatal(err)
	}
	commands, outputs := readmeSection(t, "## Getting started on AWS")
	t.Chdir(dir)
	var printed []string
	for _, line := range commands {
		line, _, _ = strings.Cut(line, "   #")
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || hasAnyPrefix(line, needAWS):
		case strings.HasPrefix(line, "export "):
			for _, kv := range strings.Fields(strings.TrimPrefix(line, "export ")) {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
		case strings.HasPrefix(line, "nodewright "):
			stdout, stderr, code := cli(t, strings.Fields(os.ExpandEnv(strings.TrimPrefix(line, "nodewright ")))...)
			if code != 0 {
				t.Fatalf("%s: exit %d\n%s", line, code, stderr)
			}
			printed = append(printed, stdout)
		case hasAnyPrefix(line, []string{"mkdir ", "envsubst ", "sed "}):
			if out, err := exec.Command("sh", "-c", line).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		default:
			t.Fatalf("getting started runs %q: run it here, or list it in needAWS", line)
		}
	}
	if len(printed) < 2 {
		t.Fatalf("ran %d nodewright commands; want validate and simulate", len(printed))
	}
	for _, want := range outputs {
		found := false
		for _, got := range printed {
			found = found || got == want
		}
		if !found {
			t.Errorf("the README shows an output no command printed:\n%s\nprinted:\n%s", want, strings.Join(printed, "\n"))
		}
	}
	if len(outputs) == 0 {
		t.Error("the section shows no output to check")
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// TestFirstFitFigure backs the README's example under `simulate`: for the
// inflate example at 10 replicas on infra/examples/default, simulate prints
// the table the README shows, and first-fit filling
// alone (the solver without its re-split pass) buys one c6g.4xlarge at
// $0.1418/h, and the two right-sized nodes simulate prints cost 21 % less.
func TestFirstFitFigure(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(examplesDir, "workloads", "inflate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wl := filepath.Join(t.TempDir(), "inflate-10.yaml")
	if err := os.WriteFile(wl, []byte(strings.Replace(string(data), "replicas: 0", "replicas: 10", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	solve := func(opts scheduling.Options) *scheduling.Plan {
		setup, err := simulation.Load(simulation.Sources{Config: filepath.Join(examplesDir, "default"), Workload: wl, Catalog: "builtin"})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := scheduling.SolveWithOptions(context.Background(), &setup.Input, opts)
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	stdout, stderr, code := cli(t, "simulate", "--config", filepath.Join(examplesDir, "default"), "--workload", wl)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil || code != 0 {
		t.Fatalf("%v, simulate exit %d: %s", err, code, stderr)
	}
	if !strings.Contains(string(readme), "\n"+stdout+"```") {
		t.Errorf("the README's simulate example is not what simulate prints:\n%s", stdout)
	}
	firstFit, plan := solve(scheduling.Options{DisableResplit: true}), solve(scheduling.Options{})
	if len(firstFit.NodeClaims) != 1 || firstFit.NodeClaims[0].InstanceType != "c6g.4xlarge" || fmt.Sprintf("%.4f", firstFit.CostPerHour) != "0.1418" {
		t.Errorf("first fit: %d claims, $%.4f/h; the README says one c6g.4xlarge at $0.1418/h", len(firstFit.NodeClaims), firstFit.CostPerHour)
	}
	if saving := math.Round(100 * (1 - plan.CostPerHour/firstFit.CostPerHour)); len(plan.NodeClaims) != 2 || saving != 21 {
		t.Errorf("plan: %d claims, %.0f %% below first fit; the README says two nodes, 21 %% less", len(plan.NodeClaims), saving)
	}
}
