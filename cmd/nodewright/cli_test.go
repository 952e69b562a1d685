package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/inspect"
	"github.com/nodewright/nodewright/internal/store/storetest"
)

// cli runs the whole CLI as main does and returns what it printed and its
// exit code.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(context.Background(), newRootCmd(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// integration skips t under -short (what says what it starts) and returns
// a context that ends after timeout or when t's cleanups have run.
func integration(t *testing.T, what string, timeout time.Duration) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: " + what)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// noAWS makes any AWS call fail at once, without network or profile.
func noAWS(t *testing.T) {
	for k, v := range map[string]string{
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"), "NODEWRIGHT_TABLE_NAME": "", "NODEWRIGHT_CLUSTER_NAME": "",
	} {
		t.Setenv(k, v)
	}
}

// schedulableWorkload is inflate.yaml without its arm64-only pod: every pod
// of it fits.
func schedulableWorkload(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(simTestdata("inflate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "inflate.yaml")
	if err := os.WriteFile(p, []byte(strings.Split(string(data), "\n---\n")[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitCodes(t *testing.T) {
	noAWS(t)
	sim := []string{"simulate", "--config", simTestdata("config.yaml"), "--region", "us-east-1"}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a part of stderr
	}{
		{"help", []string{"--help"}, exitOK, ""},
		{"simulate fits", append(sim, "--workload", schedulableWorkload(t)), exitOK, ""},
		{"simulate unschedulable", append(sim, "--workload", simTestdata("inflate.yaml")), exitUnschedulable, "Error: 1 pod(s) unschedulable"},
		{"simulate html unschedulable", append(sim, "--workload", simTestdata("inflate.yaml"), "-o", "html"), exitUnschedulable, "unschedulable"},
		{"simulate bad -o", append(sim, "--workload", simTestdata("inflate.yaml"), "-o", "xml"), exitUsage, `--output "xml"`},
		{"simulate missing flag", []string{"simulate", "--workload", "x.yaml"}, exitUsage, "--config and --workload are required (or --kubeconfig to read a cluster)"},
		{"simulate --repack offline", append(sim, "--workload", "x.yaml", "--repack"), exitUsage, "--repack needs --kubeconfig"},
		{"simulate cluster and workload", []string{"simulate", "--kubeconfig", "k", "--workload", "x.yaml"}, exitUsage, "none of the others can be"},
		{"simulate --context offline", append(sim, "--workload", "x.yaml", "--context", "prod"), exitUsage, "--context needs --kubeconfig"},
		{"simulate cluster and nodes", []string{"simulate", "--kubeconfig", "k", "--nodes", "n.yaml"}, exitUsage, "none of the others can be"},
		{"simulate missing kubeconfig", []string{"simulate", "--kubeconfig", "no-such-kubeconfig"}, exitFailure, "no-such-kubeconfig"},
		{"import without --out", []string{"import", "--kubeconfig", "k"}, exitUsage, `required flag(s) "out" not set`},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"unknown flag", []string{"get", "nodeclaims", "--frob"}, exitUsage, "unknown flag: --frob"},
		{"get without a type", []string{"get"}, exitUsage, "get needs a resource type: nodeclaims, nodepools"},
		{"get unknown type", []string{"get", "pods"}, exitUsage, `unknown resource type "pods"`},
		{"get extra argument", []string{"get", "nodeclaims", "x"}, exitUsage, "takes no arguments"},
		{"get bad -o", []string{"get", "nodeclaims", "-o", "toml"}, exitUsage, `unknown output format "toml": use wide, json, yaml, name`},
		{"get bad selector", []string{"get", "nodeclaims", "-l", "a in (b"}, exitUsage, `--selector "a in (b"`},
		{"get bad watch interval", []string{"get", "nodeclaims", "-w", "--watch-interval", "0s"}, exitUsage, "--watch-interval"},
		{"get nodepools bad -o", []string{"get", "nodepools", "-o", "csv"}, exitUsage, `"csv"`},
		{"describe without a name", []string{"describe", "nodeclaim"}, exitUsage, "takes one NodeClaim name"},
		{"describe -o wide", []string{"describe", "nodeclaim", "x", "-o", "wide"}, exitUsage, `"wide": use json, yaml, name`},
		{"delete without a name", []string{"delete", "nodeclaim"}, exitUsage, "needs at least one NodeClaim name"},
		{"delete bad -o", []string{"delete", "nodeclaim", "x", "-o", "json"}, exitUsage, `"json": use name`},
		{"local up bad --only", []string{"local", "up", "--only", "bogus"}, exitUsage, `unknown component "bogus"`},
		{"validate without paths", []string{"validate"}, exitUsage, "validate needs at least one file"},
		{"validate missing file", []string{"validate", "does-not-exist.yaml"}, exitFailure, "no such file"},
		{"get without AWS", []string{"get", "nodeclaims", "--table", "t"}, exitFailure, "no AWS region"},
		{"describe without AWS", []string{"describe", "nodeclaim", "x", "--table", "t", "-o", "yaml"}, exitFailure, "no AWS region"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := cli(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d, want %d; stderr %q, want it to contain %q", code, tc.code, errOut, tc.stderr)
			}
			if code == exitUsage && (out != "" || !strings.Contains(errOut, "--help' for usage") && !strings.Contains(errOut, "Usage:")) {
				t.Errorf("usage error printed on stdout or without a pointer to --help: %q / %q", out, errOut)
			}
			if code == exitOK && tc.name != "help" && (out == "" || errOut != "") {
				t.Errorf("ok run: stdout %q, stderr %q", out, errOut)
			}
		})
	}
}

// Every simulate -o prints the plan on stdout and nothing on stderr.
func TestSimulateFormats(t *testing.T) {
	workload := schedulableWorkload(t)
	for format, want := range map[string]string{
		"table": "new node(s), $", "json": `"nodeClaims": [`, "yaml": "nodeClaims:\n- allocatable:",
		"html": `<div class="node" data-nodepool="production">`,
	} {
		out, errOut, code := cli(t, "simulate", "--config", simTestdata("config.yaml"), "--region", "us-east-1", "--workload", workload, "-o", format)
		if code != exitOK || errOut != "" || !strings.Contains(out, want) {
			t.Errorf("-o %s: exit %d, stderr %q, stdout lacks %q:\n%s", format, code, errOut, want, out)
		}
	}
}

func TestRootHelpDocumentsExitCodes(t *testing.T) {
	out, _, code := cli(t, "--help")
	for _, want := range []string{"Exit codes:", "2  usage error", "3  simulate: the plan leaves pods unschedulable", "stdout"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("nodewright --help (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
}

func TestDeleteOutputName(t *testing.T) {
	ctx := context.Background()
	st := storetest.New()
	for _, name := range []string{"default-a", "default-b"} {
		nc := &apis.NodeClaim{}
		nc.Name = name
		if err := st.CreateNodeClaim(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	o := deleteOptions{name: true}
	if err := runDeleteNodeClaims(ctx, &out, st, []string{"default-a", "default-b"}, o, time.Now); err != nil {
		t.Fatal(err)
	}
	if want := "nodeclaim.karpenter.sh/default-a\nnodeclaim.karpenter.sh/default-b\n"; out.String() != want {
		t.Errorf("delete -o name: %q, want %q", out.String(), want)
	}
}

var watchNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func watchClaim(name string, ready bool, deletedAt time.Time) inspect.Claim {
	nc := &apis.NodeClaim{}
	nc.Name = name
	nc.CreationTimestamp = metav1.NewTime(watchNow.Add(-time.Hour))
	nc.Labels = map[string]string{apis.NodePoolLabelKey: strings.Split(name, "-")[0]}
	if ready {
		for _, c := range []string{apis.ConditionLaunched, apis.ConditionRegistered, apis.ConditionInitialized} {
			nc.SetCondition(c, metav1.ConditionTrue, c, "", nc.CreationTimestamp)
		}
	}
	return inspect.Claim{NodeClaim: nc, DeletedAt: deletedAt}
}

// polls serves one listing per poll and stops the watch after the last.
func polls(cancel context.CancelFunc, listings ...[]inspect.Claim) func(context.Context) ([]inspect.Claim, error) {
	i := 0
	return func(context.Context) ([]inspect.Claim, error) {
		l := listings[i]
		if i++; i == len(listings) {
			cancel()
		}
		return l, nil
	}
}

// The watch prints the listing, then only what changed: a claim becoming
// ready, a new claim, a claim deleted (its tombstone); an old tombstone
// shows only with --deleted, an unchanged claim never again.
func TestWatchNodeClaims(t *testing.T) {
	old := watchNow.Add(-48 * time.Hour)
	listings := [][]inspect.Claim{
		{watchClaim("default-a", false, time.Time{}), watchClaim("batch-old", true, old)},
		{watchClaim("default-a", true, time.Time{}), watchClaim("batch-old", true, old), watchClaim("default-b", false, time.Time{})},
		{watchClaim("default-a", true, time.Time{}), watchClaim("batch-old", true, old), watchClaim("default-b", false, time.Time{})},
		{watchClaim("default-a", true, watchNow), watchClaim("batch-old", true, old), watchClaim("default-b", false, time.Time{})},
	}
	for _, tc := range []struct {
		name    string
		print   inspect.PrintOptions
		deleted bool
		want    string
	}{
		{"table", inspect.PrintOptions{}, false, "" +
			"NAME        TYPE     CAPACITY   ZONE     NODE     READY     AGE   PRICE/H\n" +
			"default-a   <none>   <none>     <none>   <none>   Unknown   60m   <unknown>\n" +
			"default-a   <none>   <none>     <none>   <none>   True      60m   <unknown>\n" +
			"default-b   <none>   <none>     <none>   <none>   Unknown   60m   <unknown>\n" +
			"default-a   <none>   <none>     <none>   <none>   Deleted   60m   <unknown>\n"},
		{"name with --deleted", inspect.PrintOptions{Output: inspect.OutputName}, true, "" +
			"nodeclaim.karpenter.sh/batch-old\nnodeclaim.karpenter.sh/default-a\n" +
			"nodeclaim.karpenter.sh/default-a\nnodeclaim.karpenter.sh/default-b\n" +
			"nodeclaim.karpenter.sh/default-a\n"},
		{"no headers", inspect.PrintOptions{NoHeaders: true}, false, "" +
			"default-a   <none>   <none>   <none>   <none>   Unknown   60m   <unknown>\n" +
			"default-a   <none>   <none>   <none>   <none>   True      60m   <unknown>\n" +
			"default-b   <none>   <none>   <none>   <none>   Unknown   60m   <unknown>\n" +
			"default-a   <none>   <none>   <none>   <none>   Deleted   60m   <unknown>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errOut bytes.Buffer
			w := &claimWatch{out: &out, errOut: &errOut, print: tc.print, deleted: tc.deleted, now: func() time.Time { return watchNow }}
			if err := w.run(ctx, polls(cancel, listings...), time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("watch printed\n%s\nwant\n%s", out.String(), tc.want)
			}
		})
	}
}

// -o yaml prints one document per event, -o json one object; an empty start
// says so on stderr.
func TestWatchNodeClaimsObjects(t *testing.T) {
	for _, output := range []string{inspect.OutputYAML, inspect.OutputJSON} {
		ctx, cancel := context.WithCancel(context.Background())
		var out, errOut bytes.Buffer
		w := &claimWatch{out: &out, errOut: &errOut, print: inspect.PrintOptions{Output: output}, now: func() time.Time { return watchNow }}
		load := polls(cancel, nil, []inspect.Claim{watchClaim("default-a", false, time.Time{}), watchClaim("default-b", true, time.Time{})})
		if err := w.run(ctx, load, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		cancel()
		if !strings.Contains(errOut.String(), "No nodeclaims found") {
			t.Errorf("%s: stderr %q", output, errOut.String())
		}
		kinds, seps := strings.Count(out.String(), "NodeClaim"), strings.Count(out.String(), "---\n")
		if output == inspect.OutputYAML && (kinds != 2 || seps != 1 || !strings.Contains(out.String(), "apiVersion: karpenter.sh/v1")) {
			t.Errorf("yaml watch:\n%s", out.String())
		}
		if output == inspect.OutputJSON && (kinds != 2 || seps != 0 || !strings.Contains(out.String(), `"kind": "NodeClaim"`)) {
			t.Errorf("json watch:\n%s", out.String())
		}
	}
}

// A failing poll ends the watch with its error, unless the watch was
// stopped.
func TestWatchNodeClaimsError(t *testing.T) {
	w := &claimWatch{out: &bytes.Buffer{}, errOut: &bytes.Buffer{}, now: time.Now}
	err := w.run(context.Background(), func(context.Context) ([]inspect.Claim, error) { return nil, context.DeadlineExceeded }, time.Millisecond)
	if err == nil {
		t.Error("a failing poll did not end the watch")
	}
}

func TestSelectClaims(t *testing.T) {
	claims := []inspect.Claim{watchClaim("default-a", true, time.Time{}), watchClaim("batch-b", true, time.Time{})}
	claims[1].Labels[apis.CapacityTypeLabelKey] = apis.CapacityTypeSpot
	for sel, want := range map[string]string{
		"":                                   "default-a,batch-b",
		"karpenter.sh/nodepool=default":      "default-a",
		"karpenter.sh/nodepool!=default":     "batch-b",
		"karpenter.sh/capacity-type":         "batch-b",
		"!karpenter.sh/capacity-type":        "default-a",
		"karpenter.sh/nodepool in (a,batch)": "batch-b",
		"karpenter.sh/nodepool=gpu":          "",
	} {
		s, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range selectClaims(claims, s) {
			names = append(names, c.Name)
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("-l %q: %s, want %s", sel, got, want)
		}
	}
}
