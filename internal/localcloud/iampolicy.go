package localcloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
	"github.com/nodewright/nodewright/internal/localcloud/internal/proc"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
	"github.com/nodewright/nodewright/internal/settings"
)

// synthCluster is the cluster name the cached template is synthesized
// for. The template holds the cluster name only as literal text (tag keys,
// descriptions, the cluster ARN), so a deployment for another cluster is
// this template with the name replaced: one synthesis serves every test's
// cluster. The name is one no other text of the template contains.
const synthCluster = "nwsynthcluster"

// synthNodeRole is the node role the example configuration names.
const synthNodeRole = "nodewright-node-example"

// IAMTemplate returns the stack's synthesized CloudFormation template,
// synthesizing it the first time (`go run ./infra/cmd/nodewright-cdk`,
// ~10 s warm, minutes on a cold build cache) into the cache outside the
// repository, keyed by a hash of the sources that shape it. Concurrent
// callers in other processes wait on a file lock instead of synthesizing
// twice.
func IAMTemplate(ctx context.Context) (*iam.Template, error) {
	return iamTemplateFor(ctx, "")
}

// ShadowIAMTemplate is IAMTemplate for a stack deployed in shadow mode
// (-c mode=shadow): its roles hold read rights only.
func ShadowIAMTemplate(ctx context.Context) (*iam.Template, error) {
	return iamTemplateFor(ctx, settings.ModeShadow)
}

// iamTemplateFor is the template synthesized with -c mode=mode ("": the
// default), cached apart per mode.
func iamTemplateFor(ctx context.Context, mode string) (*iam.Template, error) {
	path, err := templatePath(ctx, mode)
	if err != nil {
		return nil, err
	}
	return readTemplate(path)
}

// StackTemplate returns the raw JSON of the stack's synthesized
// CloudFormation template (the one IAMTemplate reads), synthesizing it the
// first time: what the local run reads the functions' Lambda, SQS and
// EventBridge settings from, so they are the stack's and never restated.
func StackTemplate(ctx context.Context) ([]byte, error) {
	path, err := templatePath(ctx, "")
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the synthesized template: %w", err)
	}
	return b, nil
}

// templatePath is the cached template synthesized with -c mode=mode,
// synthesized first when the cache has none for the current sources.
func templatePath(ctx context.Context, mode string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	key, err := sourceHash(root)
	if err != nil {
		return "", err
	}
	if mode != "" {
		key += "-" + mode
	}
	cache, err := proc.CacheDir("iam")
	if err != nil {
		return "", err
	}
	path := filepath.Join(cache, key, "stack.template.json")
	if _, err := readTemplate(path); err == nil {
		return path, nil
	}
	unlock, err := proc.Lock(ctx, filepath.Join(cache, key+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := readTemplate(path); err == nil {
		return path, nil // synthesized by another process while we waited
	}
	if err := synthesize(ctx, root, path, mode); err != nil {
		return "", err
	}
	return path, nil
}

func readTemplate(path string) (*iam.Template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return iam.ParseTemplate(b)
}

// synthesize runs the CDK app without the CDK CLI: a Go CDK app given
// CDK_OUTDIR writes the cloud assembly itself.
func synthesize(ctx context.Context, root, dest, mode string) error {
	out, err := os.MkdirTemp("", "nodewright-synth-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	ctxValues := map[string]any{
		"clusterName": synthCluster, "configDir": filepath.Join(root, "infra", "testdata", "config"),
		"placeholderAssets": true, "nodeRoleName": synthNodeRole,
	}
	if mode != "" {
		ctxValues["mode"] = mode
	}
	cdkContext, _ := json.Marshal(ctxValues)
	env := proc.EnvWith("CDK_OUTDIR="+out, "CDK_CONTEXT_JSON="+string(cdkContext), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20")
	if err := proc.Run(ctx, root, env, "go", "run", "./infra/cmd/nodewright-cdk"); err != nil {
		return fmt.Errorf("synthesize the stack for IAM enforcement: %w", err)
	}
	matches, _ := filepath.Glob(filepath.Join(out, "*.template.json"))
	if len(matches) != 1 {
		return fmt.Errorf("synthesize the stack: want one template in the assembly, found %d", len(matches))
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	tmp := dest + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}

// repoRoot is the repository holding the CDK app.
func repoRoot() (string, error) {
	tools, err := kubeplane.ToolsDir()
	if err != nil {
		return "", fmt.Errorf("IAM enforcement synthesizes the stack from the source tree: %w", err)
	}
	root := filepath.Clean(filepath.Join(tools, "..", "..", ".."))
	if _, err := os.Stat(filepath.Join(root, "infra", "cmd", "nodewright-cdk")); err != nil {
		return "", fmt.Errorf("IAM enforcement: no CDK app under %s: %w", root, err)
	}
	return root, nil
}

// sourceHash hashes what shapes the template: the Go sources outside the
// local cloud (infra and the packages it imports), the example
// configuration and go.sum. Tests are left out.
func sourceHash(root string) (string, error) {
	var files []string
	for _, dir := range []string{"infra", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				if d.Name() == "node_modules" || d.Name() == "testdata" && dir != "infra" || rel == filepath.Join("internal", "localcloud") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") || strings.Contains(rel, filepath.Join("testdata", "config")) {
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("hash sources: %w", err)
		}
	}
	files = append(files, "go.sum")
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", fmt.Errorf("hash sources: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
