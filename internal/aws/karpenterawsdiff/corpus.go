package karpenterawsdiff

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	karpapis "github.com/aws/karpenter-provider-aws/pkg/apis"
	v1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/apis"
)

// KarpenterModule is the Karpenter-AWS release whose request builders the
// corpus is checked against (go.mod pins the same version).
const KarpenterModule = "github.com/aws/karpenter-provider-aws@v1.14.1"

// Class is one EC2NodeClass of the corpus as both providers read it.
type Class struct {
	// Name is "<source>/<file>#<class>".
	Name string
	// NW is the class as nodewright's loader returns it (defaulted,
	// converted from v1beta1).
	NW *apis.EC2NodeClass
	// Pool is a NodePool of the same files referencing the class (its
	// labels and taints go on the claims), or nil.
	Pool *apis.NodePool
	// K is the class as Karpenter's API server stores it: the v1 document
	// with the CRD's defaults (a v1beta1 document, which Karpenter v1.14
	// no longer serves, as nodewright converts it).
	K *v1.EC2NodeClass
}

// placeholders are the examples' shell variables, given the world's values.
var placeholders = strings.NewReplacer(
	"${CLUSTER_NAME}", clusterName,
	"${CLUSTER_ENDPOINT}", clusterEndpoint,
	"${AWS_ACCOUNT_ID}", accountID,
	"${BOOTSTRAP_TOKEN}", "abcdef.0123456789abcdef",
	"${CA_CERT_HASH}", "sha256:0000000000000000000000000000000000000000000000000000000000000000",
)

// KarpenterExamplesDir is the examples/v1 folder of the pinned Karpenter
// module in the module cache (downloaded by the go command when missing).
func KarpenterExamplesDir() (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", KarpenterModule).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", KarpenterModule, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory in %q", KarpenterModule, out)
	}
	return filepath.Join(m.Dir, "examples", "v1"), nil
}

// LoadCorpus reads every EC2NodeClass of nodewright's infra/examples (each
// example folder is one configuration), of Karpenter's examples/v1 and of
// this module's testdata (each file is one): the last holds the fields no
// example uses.
func LoadCorpus(infraExamples, karpenterExamples, extra string) ([]Class, error) {
	var sets [][]string
	dirs, err := os.ReadDir(infraExamples)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", infraExamples, err)
	}
	for _, d := range dirs {
		if d.IsDir() && d.Name() != "workloads" {
			files, err := filepath.Glob(filepath.Join(infraExamples, d.Name(), "*.yaml"))
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", d.Name(), err)
			}
			sets = append(sets, files)
		}
	}
	files, err := filepath.Glob(filepath.Join(karpenterExamples, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", karpenterExamples, err)
	}
	extras, err := filepath.Glob(filepath.Join(extra, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", extra, err)
	}
	for _, f := range append(files, extras...) {
		sets = append(sets, []string{f})
	}
	schema, err := nodeClassSchema()
	if err != nil {
		return nil, err
	}
	var out []Class
	for _, set := range sets {
		classes, err := loadSet(set, filepath.Dir(infraExamples), filepath.Dir(karpenterExamples), schema)
		if err != nil {
			return nil, err
		}
		out = append(out, classes...)
	}
	return out, nil
}

// loadSet loads one configuration (a folder's or a file's documents).
func loadSet(files []string, infraRoot, karpenterRoot string, schema *structuralschema.Structural) ([]Class, error) {
	var named []apis.NamedData
	raw := map[string]map[string]any{} // class name -> v1 document
	source := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		data = []byte(placeholders.Replace(string(data)))
		named = append(named, apis.NamedData{Name: f, Data: data})
		docs, err := splitDocuments(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		label := "karpenter/" + relOr(karpenterRoot, f)
		switch {
		case strings.HasPrefix(f, infraRoot):
			label = "infra/" + relOr(infraRoot, f)
		case !strings.HasPrefix(f, karpenterRoot):
			label = filepath.ToSlash(f)
		}
		for _, doc := range docs {
			if doc["kind"] != "EC2NodeClass" {
				continue
			}
			meta, _ := doc["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			source[name] = label
			if doc["apiVersion"] == "karpenter.k8s.aws/v1" {
				raw[name] = doc
			}
		}
	}
	cfg, err := apis.LoadNamed(named...)
	if err != nil {
		// A NodePool nodewright rejects (an upstream example names its
		// class's group "karpenter.k8s.aws/v1") leaves its classes in the
		// corpus, launched without the pool's labels and taints.
		for i := range named {
			if named[i].Data, err = onlyNodeClasses(named[i].Data); err != nil {
				return nil, fmt.Errorf("%s: %w", named[i].Name, err)
			}
		}
		if cfg, err = apis.LoadNamed(named...); err != nil {
			return nil, fmt.Errorf("nodewright cannot load %v: %w", files, err)
		}
	}
	var out []Class
	for _, nc := range cfg.NodeClasses {
		doc, ok := raw[nc.Name]
		if !ok {
			if doc, err = asDocument(nc); err != nil {
				return nil, err
			}
		}
		k, err := karpenterClass(doc, schema)
		if err != nil {
			return nil, fmt.Errorf("%s#%s: %w", source[nc.Name], nc.Name, err)
		}
		c := Class{Name: source[nc.Name] + "#" + nc.Name, NW: nc, K: k}
		for _, np := range cfg.NodePools {
			if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name == nc.Name {
				c.Pool = np
				break
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func relOr(root, f string) string {
	if r, err := filepath.Rel(root, f); err == nil {
		return filepath.ToSlash(r)
	}
	return f
}

func splitDocuments(data []byte) ([]map[string]any, error) {
	var out []map[string]any
	err := eachDocument(data, func(_ []byte, m map[string]any) { out = append(out, m) })
	return out, err
}

// onlyNodeClasses keeps a file's EC2NodeClass documents.
func onlyNodeClasses(data []byte) ([]byte, error) {
	var out bytes.Buffer
	err := eachDocument(data, func(doc []byte, m map[string]any) {
		if m["kind"] == "EC2NodeClass" {
			out.WriteString("---\n")
			out.Write(doc)
		}
	})
	return out.Bytes(), err
}

func eachDocument(data []byte, fn func(doc []byte, m map[string]any)) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("split YAML documents: %w", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return fmt.Errorf("decode YAML document: %w", err)
		}
		if m != nil {
			fn(doc, m)
		}
	}
}

// asDocument is a converted v1beta1 class as a v1 document.
func asDocument(nc *apis.EC2NodeClass) (map[string]any, error) {
	b, err := json.Marshal(nc)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", nc.Name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", nc.Name, err)
	}
	m["apiVersion"], m["kind"] = "karpenter.k8s.aws/v1", "EC2NodeClass"
	return m, nil
}

// karpenterClass applies the CRD's defaults to a document, as the API
// server does on create, and decodes it.
func karpenterClass(doc map[string]any, schema *structuralschema.Structural) (*v1.EC2NodeClass, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil { // plain JSON types for the defaulter
		return nil, fmt.Errorf("decode: %w", err)
	}
	structuraldefaulting.Default(obj, schema)
	nc := &v1.EC2NodeClass{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, nc); err != nil {
		return nil, fmt.Errorf("convert to Karpenter's EC2NodeClass: %w", err)
	}
	return nc, nil
}

// nodeClassSchema is the structural schema of Karpenter's EC2NodeClass CRD (v1).
func nodeClassSchema() (*structuralschema.Structural, error) {
	for _, crd := range karpapis.CRDs {
		if crd.Spec.Names.Kind != "EC2NodeClass" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != "v1" || v.Schema == nil {
				continue
			}
			internal := &apiext.JSONSchemaProps{}
			if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("EC2NodeClass schema: %w", err)
			}
			s, err := structuralschema.NewStructural(internal)
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass structural schema: %w", err)
			}
			return s, nil
		}
	}
	return nil, errors.New("karpenter-provider-aws embeds no EC2NodeClass v1 CRD")
}
