package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

func testImport(ctx context.Context, t *testing.T, kubeconfig string) {
	dir := filepath.Join(t.TempDir(), "karpenter")
	args := []string{"import", "--kubeconfig", kubeconfig, "--context", "reader", "--out", dir}
	out, stderr, err := runRootErr(ctx, args...)
	if err != nil {
		t.Fatalf("import: %v\n%s%s", err, out, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for i := range files {
		files[i] = filepath.Base(files[i])
	}
	if want := []string{"ec2nodeclass-default.yaml", "nodepool-default.yaml", "nodepool-static.yaml"}; !slices.Equal(files, want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	// No warning: nothing server-set is left for the loader to drop, and
	// every field is honoured (the static pool's Balanced policy too).
	if strings.Contains(stderr, "warning:") {
		t.Errorf("a warning:\n%s", stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "nodepool-default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"status", "uid", "resourceVersion", "managedFields", "creationTimestamp", "finalizers", "nodepool-hash", "generation"} {
		if strings.Contains(string(data), gone) {
			t.Errorf("nodepool-default.yaml keeps %s:\n%s", gone, data)
		}
	}
	if !strings.Contains(string(data), "team: platform") {
		t.Errorf("nodepool-default.yaml lost the user's annotation:\n%s", data)
	}
	var vout, verr bytes.Buffer
	if err := runValidate(&vout, &verr, []string{dir}); err != nil {
		t.Fatalf("validate %s: %v\n%s", dir, err, verr.String())
	}

	if _, _, err := runRootErr(ctx, args...); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("second import without --force: %v, want a refusal", err)
	}
	if out, stderr, err := runRootErr(ctx, append(args, "--force")...); err != nil {
		t.Fatalf("import --force: %v\n%s%s", err, out, stderr)
	}
}

// assertOnlyReads checks the audit log: the reader made requests, all of
// them gets and lists, and RBAC refused none (its rights suffice).
func assertOnlyReads(t *testing.T, plane *kubeplane.Plane) {
	t.Helper()
	events, err := plane.Audit()
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 {
		t.Fatal("no audited request: the audit log does not see the reader")
	}
	for _, ev := range events {
		if ev.Verb != "get" && ev.Verb != "list" {
			t.Errorf("mutating or unexpected request: %s", ev)
		}
		if ev.Forbidden {
			t.Errorf("refused by RBAC (the documented rights do not suffice): %s", ev)
		}
	}
}
