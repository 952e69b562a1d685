package awssim

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

// newTestServer starts a simulator with fast delays and returns an SDK config pointed at it.
func newTestServer(t *testing.T, mod func(*Options)) (*Server, aws.Config) {
	t.Helper()
	opts := Options{Region: "us-west-2", Catalog: ec2sim.DefaultCatalog("us-west-2"), ClusterName: "test", KubernetesVersion: "1.36", Seed: 42, TimeScale: 100,
		Delays: Delays{Pending: time.Second, ShuttingDown: time.Second, NodeRegistration: time.Second, SpotInterruption: 120 * time.Second}}
	if mod != nil {
		mod(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	cfg := s.ClientConfig()
	cfg.RetryMaxAttempts = 1
	return s, cfg
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// paginator is an AWS SDK v2 paginator of outputs O for a client with
// options Opts.
type paginator[O, Opts any] interface {
	HasMorePages() bool
	NextPage(context.Context, ...func(*Opts)) (O, error)
}

// allPages runs a paginator to its end and returns every page.
func allPages[O, Opts any](t *testing.T, p paginator[O, Opts]) []O {
	t.Helper()
	var pages []O
	for p.HasMorePages() {
		pg, err := p.NextPage(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, pg)
	}
	return pages
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
