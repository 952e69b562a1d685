package kubeplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestBuiltName(t *testing.T) {
	for pkg, want := range map[string]string{
		"go.etcd.io/etcd/server/v3":            "server",
		"k8s.io/kubernetes/cmd/kube-apiserver": "kube-apiserver",
		"sigs.k8s.io/kwok/cmd/kwok":            "kwok",
		"example.com/tool/v":                   "v",
	} {
		if got := builtName(pkg); got != want {
			t.Errorf("builtName(%q) = %q, want %q", pkg, got, want)
		}
	}
}

func TestLDFlagsStampBothVersionPackages(t *testing.T) {
	f := LDFlags()
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=" + KubeVersion,
		"-X k8s.io/component-base/version.gitMajor=1",
		"-X k8s.io/component-base/version.gitMinor=37",
		"-X k8s.io/client-go/pkg/version.gitVersion=" + KubeVersion,
		"-X k8s.io/client-go/pkg/version.gitMinor=37",
	} {
		if !strings.Contains(f, want) {
			t.Errorf("LDFlags %q lacks %q", f, want)
		}
	}
}

func TestToolsDirFoundFromThePackage(t *testing.T) {
	d, err := ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "go.sum")); err != nil {
		t.Fatalf("tools dir %s has no go.sum: %v", d, err)
	}
	t.Setenv("NODEWRIGHT_TOOLS_DIR", t.TempDir())
	if _, err := ToolsDir(); err == nil {
		t.Fatal("NODEWRIGHT_TOOLS_DIR pointing at an empty dir accepted")
	}
}

func TestPKIServesLoopbackAndVerifies(t *testing.T) {
	dir := t.TempDir()
	p, err := writePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(p.ServingCert, p.ServingKey)
	if err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.CAPEM) {
		t.Fatal("CA PEM unparsable")
	}
	for _, name := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("serving cert for %s: %v", name, err)
		}
	}
	pub, _ := os.ReadFile(p.SAPub)
	if b, _ := pem.Decode(pub); b == nil || b.Type != "PUBLIC KEY" {
		t.Fatalf("service-account public key PEM: %q", pub)
	}
	if st, _ := os.Stat(p.SAKey); st.Mode().Perm() != 0o600 {
		t.Errorf("service-account key mode %v, want 0600", st.Mode().Perm())
	}
}

// The embedded KWOK stages parse as YAML documents of kind Stage, with the
// version placeholder substituted.
func TestStagesFile(t *testing.T) {
	docs := strings.Split(strings.ReplaceAll(stagesYAML, "@KUBE_VERSION@", KubeVersion), "\n---\n")
	names := map[string]bool{}
	for _, d := range docs {
		var st struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				ResourceRef struct{ Kind string } `json:"resourceRef"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(d), &st); err != nil {
			t.Fatalf("stage document: %v\n%s", err, d)
		}
		if st.Kind != "Stage" || st.Metadata.Name == "" {
			t.Fatalf("document is not a named Stage: %+v", st)
		}
		names[st.Metadata.Name] = true
	}
	for _, want := range []string{"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pod-delete"} {
		if !names[want] {
			t.Errorf("stage %s missing (have %v)", want, names)
		}
	}
	if strings.Contains(stagesYAML, KubeVersion) || !strings.Contains(stagesYAML, "@KUBE_VERSION@") {
		t.Error("stages should carry the version placeholder, not a literal version")
	}
}

func TestSanitizeLabel(t *testing.T) {
	for in, want := range map[string]string{
		"TestFoo/sub_case":      "TestFoo_sub_case",
		"_x_":                   "x",
		strings.Repeat("a", 80): strings.Repeat("a", 63),
	} {
		if got := sanitizeLabel(in); got != want {
			t.Errorf("sanitizeLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
