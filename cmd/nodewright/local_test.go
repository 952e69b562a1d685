package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4566": "http://127.0.0.1:4566",
		"/tmp/a b/kubeconfig":   "'/tmp/a b/kubeconfig'",
		"it's":                  `'it'\''s'`,
		"":                      "''",
		"localcloud/secret/key": "localcloud/secret/key",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
	// What we print must survive a real shell round trip.
	var out bytes.Buffer
	writeEnv(&out, []string{"NW_A=/tmp/a b", "NW_B=it's", "NW_C=x=y"})
	cmd := exec.Command("/bin/sh", "-c", out.String()+`printf '%s|%s|%s' "$NW_A" "$NW_B" "$NW_C"`)
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	if string(got) != "/tmp/a b|it's|x=y" {
		t.Fatalf("round trip = %q", got)
	}
}

func TestParseComponents(t *testing.T) {
	c, err := parseComponents([]string{"dynamodb", "ControlPlane"})
	if err != nil || c != 3 {
		t.Fatalf("parseComponents = %b, %v", c, err)
	}
	if c, err := parseComponents(nil); err != nil || c != 0 {
		t.Fatalf("no --only = %b, %v; want 0 (all)", c, err)
	}
	if _, err := parseComponents([]string{"s3"}); err == nil || !strings.Contains(err.Error(), `"s3"`) {
		t.Fatalf("unknown component: %v", err)
	}
}

// `local up` prints the env, records its state for `local env`, and stops
// and cleans up when its context ends (Ctrl-C in main).
func TestLocalUpEnvAndStop(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts dynalite")
	}
	t.Setenv("NODEWRIGHT_LOCAL_STATE", filepath.Join(t.TempDir(), "state.json"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var upOut, upErr bytes.Buffer
	up := newLocalCmd()
	up.SetArgs([]string{"up", "--only", "dynamodb"})
	up.SetOut(&upOut)
	up.SetErr(&upErr)
	done := make(chan error, 1)
	go func() { done <- up.ExecuteContext(ctx) }()

	var envOut bytes.Buffer
	deadline := time.Now().Add(2 * time.Minute)
	for {
		env := newLocalCmd()
		env.SetArgs([]string{"env"})
		envOut.Reset()
		env.SetOut(&envOut)
		env.SetErr(&bytes.Buffer{})
		if env.Execute() == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("up exited early: %v\n%s", err, upErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("local env never succeeded; up stderr:\n%s", upErr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(envOut.String(), "export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:") {
		t.Fatalf("local env output lacks the dynalite endpoint:\n%s", envOut.String())
	}
	if strings.Contains(envOut.String(), "KUBECONFIG") {
		t.Fatalf("local env names a kubeconfig with no control plane:\n%s", envOut.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("up: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not stop after its context ended")
	}
	env := newLocalCmd()
	env.SetArgs([]string{"env"})
	env.SetOut(&bytes.Buffer{})
	env.SetErr(&bytes.Buffer{})
	if err := env.Execute(); err == nil {
		t.Fatal("local env succeeds after up stopped")
	}
}
