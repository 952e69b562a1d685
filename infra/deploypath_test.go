package infra

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// deployDoc is one "## " section of a document whose sh blocks are the
// commands a user runs to deploy. The deploy-path test runs every line of
// them, in document order, in one shell.
type deployDoc struct {
	file, heading string
	// setup creates what the section assumes the user already has (its own
	// configuration directory); it runs before the section's commands.
	setup string
}

// deployDocs are the getting-started and deploy sections of README.md and
// infra/README.md. The shadow-mode section comes after getting started: it
// deploys the karpenter/ directory that getting started wrote.
var deployDocs = []deployDoc{
	{file: "README.md", heading: "## Getting started on AWS"},
	{file: "README.md", heading: "## Trying nodewright beside Karpenter (shadow mode)"},
	{file: "infra/README.md", heading: "## Deploy",
		setup: "mkdir -p deploy/karpenter && CLUSTER_NAME=prod envsubst < infra/examples/getting-started/default.yaml > deploy/karpenter/default.yaml"},
}

// needsAWS are the documented commands that only call AWS or the user's
// cluster; the test shows them skipped. Every other line runs, so a new
// step in a deploy section is tested the day it is written (or listed here).
var needsAWS = []string{"aws ", "kubectl ", "TABLE=$(aws ", "nodewright get ", "nodewright report ", "nodewright doctor ",
	"go run ./cmd/nodewright report ", "go run ./cmd/nodewright get ", "go run ./cmd/nodewright doctor "}

// cdkAWSCommand matches `cdk deploy` and `cdk destroy` (by the pinned CLI's
// path or the alias infra/README.md defines). Both synthesize the app before
// they call AWS; the test runs that synth, with the same arguments.
var cdkAWSCommand = regexp.MustCompile(`^((?:infra/node_modules/\.bin/)?cdk) (deploy|destroy)\b(.*)$`)

// TestDeployPath runs, in a fresh copy of the repository, what a user runs
// before `cdk deploy`: `make build && make synth`, then every command of
// the deploy sections (deployDocs) as written, with each `cdk deploy` or
// `cdk destroy` run up to its synth. Every cloud assembly must hold six
// Lambda functions whose code is an asset with a linux/arm64 `bootstrap`
// built from that function's package: not a placeholder, not another
// function's binary.
func TestDeployPath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every function for linux/arm64 and runs the CDK CLI: not in -short mode")
	}
	for _, tool := range []string{"git", "make", "bash", "node", "npm", "envsubst", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	work := t.TempDir()
	repo := freshCheckout(t, filepath.Join(work, "nodewright"))
	script, assemblies := deployScript(t, repo)
	script = "make build\nmake synth\n" + script
	assemblies = append([]string{"cdk.out"}, assemblies...)

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	// A file, not -c: bash then reads it line by line, so the alias
	// infra/README.md defines applies to the lines after it.
	scriptFile := filepath.Join(work, "deploy.sh")
	if err := os.WriteFile(scriptFile, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", scriptFile)
	cmd.Dir = repo
	cmd.Env = deployEnv(t, work)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the deploy path failed: %v\nscript:\n%s\noutput:\n%s", err, script, tail(out.String(), 8000))
	}
	t.Logf("ran:\n%s", script)
	checkDist(t, repo)
	for _, dir := range assemblies {
		t.Run(dir, func(t *testing.T) { checkAssembly(t, filepath.Join(repo, dir)) })
	}
}

// TestMakeBuildsTheStacksFunctions keeps `make build`'s list (the main
// packages under functions/) the stack's list: a file of functions/ or a
// package that is not a command in it breaks `make build`; a function the
// stack deploys but make does not build breaks the deploy.
func TestMakeBuildsTheStacksFunctions(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("make not installed: %v", err)
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "print-functions")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make print-functions: %v", err)
	}
	got := strings.Fields(string(out))
	want := slices.Clone(Functions)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("make build builds %v; the stack deploys %v", got, want)
	}
}

// freshCheckout copies what a clone of the working tree would hold (tracked
// and new files, nothing git ignores: no dist/, no node_modules) to dst.
func freshCheckout(t *testing.T, dst string) string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git work tree (git ls-files: %v): the deploy path starts from a clone", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join("..", rel)
		st, err := os.Lstat(src)
		if err != nil || st.IsDir() {
			continue // deleted in the work tree, or a submodule
		}
		if err := copyFile(src, filepath.Join(dst, rel), st.Mode()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if mode&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	outf, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(outf, in); err != nil {
		outf.Close()
		return err
	}
	return outf.Close()
}

// deployEnv is the user's environment without AWS credentials (so no
// command can reach an account), with `go install` writing into the test's
// own bin directory, which comes first on PATH.
func deployEnv(t *testing.T, work string) []string {
	t.Helper()
	bin := filepath.Join(work, "bin")
	var env []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "AWS_"), strings.HasPrefix(k, "CDK_"), k == "CLUSTER_NAME", k == "CONFIG_DIR",
			k == "GOBIN", k == "GOFLAGS", k == "MAKEFLAGS", k == "MAKELEVEL":
		case k == "PATH":
			env = append(env, "PATH="+bin+string(os.PathListSeparator)+v)
		default:
			env = append(env, kv)
		}
	}
	return append(env, "GOBIN="+bin, "GOFLAGS=-mod=readonly",
		"AWS_CONFIG_FILE="+filepath.Join(work, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(work, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true")
}

// deployScript turns the deploy sections into one bash script, and returns
// the cloud assembly directory each `cdk deploy` / `cdk destroy` synthesizes
// into (one per distinct argument list).
func deployScript(t *testing.T, repo string) (string, []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("set -euo pipefail\nshopt -s expand_aliases\n")
	var assemblies []string
	seen := map[string]string{}
	for _, doc := range deployDocs {
		lines := shellLines(t, filepath.Join(repo, doc.file), doc.heading)
		fmt.Fprintf(&b, "echo %s\n", shellQuote("== "+doc.file+" "+doc.heading))
		if doc.setup != "" {
			fmt.Fprintf(&b, "%s\n", doc.setup)
		}
		for _, line := range lines {
			b.WriteString(scriptLine(line, seen, &assemblies) + "\n")
		}
	}
	return b.String(), assemblies
}

// scriptLine is what the test runs for one documented command.
func scriptLine(line string, seen map[string]string, assemblies *[]string) string {
	trimmed := strings.TrimSpace(line)
	if m := cdkAWSCommand.FindStringSubmatch(trimmed); m != nil {
		args, _, _ := strings.Cut(m[3], " #")
		args = strings.TrimSpace(args)
		if dir, ok := seen[args]; ok {
			return "echo " + shellQuote("+ "+trimmed+"  (synthesized already into "+dir+")")
		}
		dir := fmt.Sprintf("cdk.out.%d", len(*assemblies)+1)
		seen[args] = dir
		*assemblies = append(*assemblies, dir)
		return fmt.Sprintf("echo %s\n%s synth --quiet %s --output %s", shellQuote("+ "+trimmed+"  (up to its synth)"), m[1], args, dir)
	}
	for _, p := range needsAWS {
		if strings.HasPrefix(trimmed, p) {
			return "echo " + shellQuote("skipped, needs AWS or a cluster: "+trimmed)
		}
	}
	return "echo " + shellQuote("+ "+trimmed) + "\n" + line
}

// shellQuote quotes s for bash as one word, with nothing expanded.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellLines returns the lines of the sh blocks of one "## " section, with
// backslash continuations joined. A missing section fails the test: the
// deploy docs were renamed and this test would silently run nothing.
func shellLines(t *testing.T, file, heading string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	in, fenced, pending := false, false, ""
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == heading
		case in && !fenced && line == "```sh":
			fenced = true
		case in && fenced && line == "```":
			fenced = false
		case in && fenced && strings.HasSuffix(line, "\\"):
			pending += strings.TrimSuffix(line, "\\")
		case in && fenced:
			if l := strings.TrimSpace(pending + line); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, pending+line)
			}
			pending = ""
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s has no %q section with sh commands", file, heading)
	}
	return lines
}

// checkDist checks `make build`'s output: a bootstrap for each of the
// stack's functions and nothing else.
func checkDist(t *testing.T, repo string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repo, "dist"))
	if err != nil {
		t.Fatalf("make build wrote no dist/: %v", err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := slices.Clone(Functions)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("dist/ holds %v, want the stack's functions %v", got, want)
	}
	for _, fn := range Functions {
		checkBootstrap(t, filepath.Join(repo, "dist", fn, "bootstrap"), fn)
	}
}

// checkAssembly checks that every Lambda function of the assembly's stack
// deploys an asset that exists in the assembly and holds its own function's
// linux/arm64 bootstrap, and that every other asset the template names
// exists too.
func checkAssembly(t *testing.T, dir string) {
	t.Helper()
	templates, _ := filepath.Glob(filepath.Join(dir, "*.template.json"))
	if len(templates) != 1 {
		t.Fatalf("%s: want one stack template, found %v", dir, templates)
	}
	tpl := readJSON(t, templates[0])
	assets := assetSources(t, strings.TrimSuffix(templates[0], ".template.json")+".assets.json")
	var deployed []string
	for _, fn := range resources(tpl, "AWS::Lambda::Function") {
		name := functionName(fn)
		deployed = append(deployed, name)
		if arch := js(fn.Props["Architectures"]); arch != `["arm64"]` {
			t.Errorf("%s: architectures %s, want [arm64] (the bootstrap is built for arm64)", fn.ID, arch)
		}
		if h := fn.Props["Handler"]; h != "bootstrap" {
			t.Errorf("%s: handler %v, want bootstrap", fn.ID, h)
		}
		src := assetOf(t, fn.ID, fn.Props["Code"], assets)
		if src != "" {
			checkBootstrap(t, filepath.Join(dir, src, "bootstrap"), name)
		}
	}
	slices.Sort(deployed)
	want := slices.Clone(Functions)
	slices.Sort(want)
	if !slices.Equal(deployed, want) {
		t.Errorf("the template deploys functions %v, want %v", deployed, want)
	}
	for _, layer := range resources(tpl, "AWS::Lambda::LayerVersion") {
		if src := assetOf(t, layer.ID, layer.Props["Content"], assets); src != "" {
			if files, _ := filepath.Glob(filepath.Join(dir, src, "nodewright", "config", "*.yaml")); len(files) == 0 {
				t.Errorf("%s: the config layer asset %s holds no configuration", layer.ID, src)
			}
		}
	}
}

// functionName reads which nodewright function a Lambda function is from
// its description ("nodewright <function> for EKS cluster <cluster>").
func functionName(fn resource) string {
	desc, _ := fn.Props["Description"].(string)
	name, _, _ := strings.Cut(strings.TrimPrefix(desc, "nodewright "), " ")
	return name
}

// assetSources maps each file asset's hash to its directory in the assembly
// (only zip-packaged directories: what Lambda code and layers are).
func assetSources(t *testing.T, path string) map[string]string {
	t.Helper()
	var manifest struct {
		Files map[string]struct {
			Source struct {
				Path      string `json:"path"`
				Packaging string `json:"packaging"`
			} `json:"source"`
		} `json:"files"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the assembly has no asset manifest: %v", err)
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for hash, f := range manifest.Files {
		if f.Source.Packaging == "zip" {
			out[hash] = f.Source.Path
		}
	}
	return out
}

// assetOf returns the assembly directory a Code or Content property's S3Key
// names, failing the test when the asset is not in the assembly.
func assetOf(t *testing.T, id string, code interface{}, assets map[string]string) string {
	t.Helper()
	m, _ := code.(map[string]interface{})
	key, _ := m["S3Key"].(string)
	hash, ok := strings.CutSuffix(key, ".zip")
	src := assets[hash]
	if !ok || src == "" {
		t.Errorf("%s: code %s is not a zip asset of the assembly", id, js(code))
		return ""
	}
	return src
}

// checkBootstrap checks that path is a Linux arm64 executable built from
// functions/<fn> with cgo off, as Lambda's provided.al2023 arm64 runtime
// runs it.
func checkBootstrap(t *testing.T, path, fn string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Errorf("%s: %v", fn, err)
		return
	}
	if st.Mode()&0o111 == 0 {
		t.Errorf("%s: %s is not executable", fn, path)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: %s is not an ELF binary (a placeholder?): %v", fn, path, err)
		return
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Type != elf.ET_EXEC {
		t.Errorf("%s: %s is a %v %v binary, want an arm64 executable", fn, path, f.Machine, f.Type)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %s has no Go build information: %v", fn, path, err)
		return
	}
	if want := "github.com/nodewright/nodewright/functions/" + fn; info.Path != want {
		t.Errorf("%s: %s was built from %s, want %s", fn, path, info.Path, want)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOOS"] != "linux" || settings["GOARCH"] != "arm64" || settings["CGO_ENABLED"] != "0" {
		t.Errorf("%s: built with GOOS=%s GOARCH=%s CGO_ENABLED=%s, want linux arm64 0",
			fn, settings["GOOS"], settings["GOARCH"], settings["CGO_ENABLED"])
	}
}

func readJSON(t *testing.T, path string) map[string]interface{} {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]interface{}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}
