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
// IAM is enforced by default (Options.IAM): Start synthesizes the CDK stack
// once per change of its sources (`go run ./infra/cmd/nodewright-cdk` into
// $XDG_CACHE_HOME/nodewright/iam/<source hash>), and Deploy registers a
// deployment's roles, whose policies are the template's resolved against
// the deployment's own table, queues and secret. Calls signed with a role's
// keys are evaluated under its policies (awssim/iam); calls with the
// cloud's own keys (Env) are the account administrator's, for what the
// stack's deployment, not its functions, would do (create tables, queues,
// rules). DynamoDB calls go through the simulator to dynalite so they are
// evaluated too. A package whose calls were refused fails in Main, with
// each denial's decoded reason; ExpectDenials marks the ones a test
// provokes on purpose. With NODEWRIGHT_IAM_COVERAGE_DIR set each package
// writes the statements its calls used (cmd/iamcoverage merges them).
//
// Options.Components starts only part of it (e.g. localcloud.DynamoDB).
// Every process is started in its own process group with a parent-death
// signal and stopped by PID on Close, so nothing outlives a test binary.
package localcloud
