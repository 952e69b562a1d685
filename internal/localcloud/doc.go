// Package localcloud starts the project's local cloud: a real Kubernetes
// control plane (package kubeplane: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and KWOK fake kubelets), a
// DynamoDB-compatible store (package dynalite) and the AWS wire-protocol
// simulator (package awssim), wired together so the unmodified aws-sdk-go-v2
// and client-go code paths run against them on 127.0.0.1:
//
//   - kube-apiserver authenticates EKS tokens through the simulator's
//     TokenReview webhook, and EKS DescribeCluster reports its real endpoint
//     and CA;
//   - the simulator's kubelet emulation registers a Node for every running
//     instance, which KWOK keeps Ready and whose pods it runs;
//   - Cloud.Env publishes AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, region,
//     fake credentials, KUBECONFIG and NODEWRIGHT_CLUSTER_NAME, so a child
//     process (or another shell, via `nodewright local env`) uses it as is.
//
// The first start builds the control plane from the pinned tools module
// (internal/localcloud/tools, its own go.mod) into
// $XDG_CACHE_HOME/nodewright/controlplane/<go.sum hash>/bin and installs
// dynalite with `npm ci` into $XDG_CACHE_HOME/nodewright/dynalite/<lock hash>;
// later starts reuse both and take a few seconds (BenchmarkStart).
//
// In tests, share one cloud per package and use a fresh namespace (or
// table) per test; integration tests skip in -short mode:
//
//	var shared = localcloud.NewShared(localcloud.Options{})
//
//	func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		cloud := shared.Get(t) // skips in -short; starts on first use
//		ns := cloud.NewNamespace(t)
//		...
//	}
//
// Options.Components starts only part of it (e.g. localcloud.DynamoDB).
// Every process is started in its own process group with a parent-death
// signal and stopped by PID on Close, so nothing outlives a test binary.
package localcloud
