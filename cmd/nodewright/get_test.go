package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/dynalite"
	"github.com/nodewright/nodewright/internal/store"
)

func run(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	err := cmd.Execute()
	return out.String(), err
}

// TestGetAndDescribeOnDynalite runs the commands as a user would, against a
// table on dynalite that the store (the functions' own code) wrote.
func TestGetAndDescribeOnDynalite(t *testing.T) {
	ctx := integration(t, "starts dynalite", 3*time.Minute)
	table, st := dynaliteTable(ctx, t)
	formatsOnDynalite(t, table)

	out, err := run(t, newGetCmd(), "nodeclaims", "--table", table, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "default-cli0") ||
		!strings.Contains(lines[1], "True") || !strings.Contains(lines[1], "120m") || !strings.Contains(lines[1], "$0.0960") {
		t.Errorf("get nodeclaims -o wide:\n%s", out)
	}
	out, err = run(t, newGetCmd(), "nodeclaims", "--table", table, "--deleted", "--nodepool", "batch", "-o", "json")
	if err != nil || !strings.Contains(out, `"name": "batch-cli2"`) || !strings.Contains(out, "nodewright.io/deleted-at") {
		t.Errorf("get nodeclaims --deleted -o json: %v\n%s", err, out)
	}
	if _, err := run(t, newGetCmd(), "nodeclaims", "--table", table, "-o", "toml"); err == nil || !strings.Contains(err.Error(), `"toml"`) {
		t.Errorf("bad -o: %v", err)
	}

	cfgDir := filepath.Join("..", "..", "internal", "inspect", "testdata", "config")
	out, err = run(t, newGetCmd(), "nodepools", "--table", table, "--config", cfgDir)
	if err != nil || !regexpLine(out, `^default\s+default\s+<none>\s+2/10\s+2\s+4/100\s+16Gi/400Gi\s+<none>\s+\$0\.1920$`) ||
		!strings.Contains(out, "Total: 2 nodes, $0.1920/h") {
		t.Errorf("get nodepools: %v\n%s", err, out)
	}

	out, err = run(t, newDescribeCmd(), "nodeclaim", "batch-cli2", "--table", table)
	if err != nil || !strings.Contains(out, "Status:         Deleted") || !strings.Contains(out, "Reason:   Empty") ||
		!strings.Contains(out, "no pods for 30s") || !strings.Contains(out, "Normal  Deleted") {
		t.Errorf("describe deleted claim: %v\n%s", err, out)
	}
	if _, err := run(t, newDescribeCmd(), "nodeclaim", "nope", "--table", table); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("describe missing: %v", err)
	}

	// No --table: the table name comes from the stack's outputs.
	cfn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("StackName") != "nodewright-prod" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`<ErrorResponse><Error><Code>ValidationError</Code><Message>Stack with id ` + r.Form.Get("StackName") + ` does not exist</Message></Error></ErrorResponse>`))
			return
		}
		fmt.Fprintf(w, `<DescribeStacksResponse><DescribeStacksResult><Stacks><member><StackName>nodewright-prod</StackName><Outputs><member><OutputKey>TableName</OutputKey><OutputValue>%s</OutputValue></member></Outputs></member></Stacks></DescribeStacksResult></DescribeStacksResponse>`, table)
	}))
	defer cfn.Close()
	t.Setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", cfn.URL)
	out, err = run(t, newGetCmd(), "nodeclaims", "--cluster", "prod")
	if err != nil || !strings.Contains(out, "default-cli1") {
		t.Errorf("get nodeclaims --cluster prod: %v\n%s", err, out)
	}
	if _, err := run(t, newGetCmd(), "nodeclaims", "--stack", "other"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing stack: %v", err)
	}
	if _, err := run(t, newGetCmd(), "nodeclaims"); err == nil || !strings.Contains(err.Error(), "--table") {
		t.Errorf("no table: %v", err)
	}
	watchOnDynalite(ctx, t, table, st) // last: it adds a claim
}

// dynaliteTable starts dynalite, points the AWS SDK at it and writes a table
// the way the functions do: default-cli0 and default-cli1 live (m5.large
// on-demand in us-west-2a, registered and initialized two hours ago) and
// batch-cli2 deleted (a tombstone).
func dynaliteTable(ctx context.Context, t *testing.T) (string, *store.Store) {
	t.Helper()
	srv, err := dynalite.Start(ctx, dynalite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": srv.Endpoint(), "AWS_ACCESS_KEY_ID": "AKIDLOCAL", "AWS_SECRET_ACCESS_KEY": "local-secret",
		"AWS_REGION": "us-west-2", "AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"),
		"AWS_PROFILE": "", "NODEWRIGHT_TABLE_NAME": "", "NODEWRIGHT_CLUSTER_NAME": "", "NODEWRIGHT_CONFIG_DIR": "",
	} {
		t.Setenv(k, v)
	}
	table := fmt.Sprintf("cli-%d", time.Now().UnixNano())
	st := cloudtest.NewTable(ctx, t, dynalite.Client(t, srv.Endpoint()), table)
	created := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	for i, pool := range []string{"default", "default", "batch"} {
		nc := &apis.NodeClaim{}
		nc.Name = fmt.Sprintf("%s-cli%d", pool, i)
		nc.CreationTimestamp = created
		nc.Labels = map[string]string{apis.NodePoolLabelKey: pool, catalog.LabelInstanceType: "m5.large",
			catalog.LabelTopologyZone: "us-west-2a", apis.CapacityTypeLabelKey: "on-demand"}
		nc.Spec.NodeClassRef = &apis.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
		nc.Status.InstanceID = fmt.Sprintf("i-0%016d", i)
		nc.Status.NodeName = fmt.Sprintf("ip-10-0-0-%d.us-west-2.compute.internal", i)
		nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
		for _, c := range []string{apis.ConditionLaunched, apis.ConditionRegistered, apis.ConditionInitialized} {
			nc.SetCondition(c, metav1.ConditionTrue, c, "", created)
		}
		if err := st.CreateNodeClaim(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	gone, _ := st.GetNodeClaim(ctx, "batch-cli2")
	gone.MarkForDeletion(apis.DeletionReasonEmpty, "no pods for 30s", metav1.Now())
	if err := st.UpdateNodeClaim(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteNodeClaim(ctx, gone); err != nil {
		t.Fatal(err)
	}
	return table, st
}

// formatsOnDynalite runs every -o of get and describe, --no-headers and -l
// through the whole CLI (execute, as main) against the table.
func formatsOnDynalite(t *testing.T, table string) {
	for _, tc := range []struct {
		args []string
		// want are lines (regexps) stdout must have, in any order; lines
		// counts stdout's lines.
		want  []string
		lines int
	}{
		{[]string{"get", "nodeclaims"}, []string{`^NAME\s+TYPE\s+CAPACITY\s+ZONE\s+NODE\s+READY\s+AGE\s+PRICE/H$`, `^default-cli0\s+m5.large\s+on-demand\s+us-west-2a\s+ip-10-0-0-0\S+\s+True\s+120m\s+\$0.0960$`}, 3},
		{[]string{"get", "nodeclaims", "-o", "wide", "--no-headers"}, []string{`^default-cli1\s.*\sdefault\s+default\s+\$0.0960$`}, 2},
		{[]string{"get", "nodeclaims", "-o", "name", "--deleted"}, []string{`^nodeclaim.karpenter.sh/batch-cli2$`, `^nodeclaim.karpenter.sh/default-cli0$`}, 3},
		{[]string{"get", "nodeclaims", "-o", "json", "-l", "karpenter.sh/nodepool=default"}, []string{`^    "kind": "List",$`, `^            "kind": "NodeClaim",$`, `^                "name": "default-cli1",$`}, -1},
		{[]string{"get", "nodeclaims", "-o", "yaml", "--deleted", "-l", "karpenter.sh/nodepool in (batch)"}, []string{`^kind: List$`, `^- apiVersion: karpenter.sh/v1$`, `^    name: batch-cli2$`, `^      nodewright.io/deleted-at: `}, -1},
		{[]string{"get", "nodeclaims", "-l", "karpenter.sh/nodepool notin (default,batch)"}, nil, 0},
		{[]string{"get", "nodepools", "-o", "name"}, []string{`^nodepool.karpenter.sh/default$`}, 1},
		{[]string{"get", "nodepools", "--no-headers"}, []string{`^default\s+<not configured>\s+<none>\s+2\s+2\s+4\s+16Gi\s+<none>\s+\$0.1920$`}, 1},
		{[]string{"get", "nodepools", "-o", "yaml"}, []string{`^- configured: false$`, `^costPerHour: 0.192$`, `^nodes: 2$`}, -1},
		{[]string{"describe", "nodeclaim", "default-cli0", "-o", "yaml"}, []string{`^apiVersion: karpenter.sh/v1$`, `^kind: NodeClaim$`, `^  name: default-cli0$`}, -1},
		{[]string{"describe", "nodeclaim", "batch-cli2", "-o", "json"}, []string{`^    "kind": "NodeClaim",$`, `"nodewright.io/deleted-at": `}, -1},
		{[]string{"describe", "nodeclaim", "batch-cli2", "-o", "name"}, []string{`^nodeclaim.karpenter.sh/batch-cli2$`}, 1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := cli(t, append(tc.args, "--table", table)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, re := range tc.want {
				if !regexpLine(out, re) {
					t.Errorf("no line matches %s:\n%s", re, out)
				}
			}
			if n := strings.Count(out, "\n"); tc.lines >= 0 && n != tc.lines {
				t.Errorf("%d lines, want %d:\n%s", n, tc.lines, out)
			}
			if (tc.lines == 0) != strings.Contains(errOut, "No nodeclaims found.") {
				t.Errorf("stderr %q", errOut)
			}
		})
	}
}

// watchOnDynalite: get nodeclaims -w prints the listing, then a claim
// created while it watches; cancelling (Ctrl-C) ends it with exit 0.
func watchOnDynalite(ctx context.Context, t *testing.T, table string, st *store.Store) {
	wctx, stop := context.WithCancel(ctx)
	out := &cloudtest.SyncBuffer{}
	done := make(chan int)
	go func() {
		args := []string{"get", "nodeclaims", "-w", "--watch-interval", "100ms", "-o", "name", "--table", table}
		done <- execute(wctx, newRootCmd(), args, out, io.Discard)
	}()
	waitFor := func(s string) {
		for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), s); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("watch did not print %s:\n%s", s, out.String())
			}
		}
	}
	waitFor("nodeclaim.karpenter.sh/default-cli1\n")
	nc := &apis.NodeClaim{}
	nc.Name = "default-cli9"
	if err := st.CreateNodeClaim(ctx, nc); err != nil {
		t.Fatal(err)
	}
	waitFor("nodeclaim.karpenter.sh/default-cli9\n")
	stop()
	if code := <-done; code != exitOK {
		t.Errorf("watch ended with exit %d", code)
	}
	if want := "nodeclaim.karpenter.sh/default-cli0\nnodeclaim.karpenter.sh/default-cli1\nnodeclaim.karpenter.sh/default-cli9\n"; out.String() != want {
		t.Errorf("watch printed %q, want %q", out.String(), want)
	}
}

func regexpLine(out, re string) bool {
	for _, l := range strings.Split(out, "\n") {
		if ok, _ := regexp.MatchString(re, strings.TrimRight(l, " ")); ok {
			return true
		}
	}
	return false
}
