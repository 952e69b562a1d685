package apis

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Load reads NodePools and EC2NodeClasses from files and directories
// (directories recursively: *.yaml, *.yml, *.json; hidden directories are
// skipped), each possibly holding several YAML documents. Decoding is strict:
// unknown fields are errors. v1beta1 documents are converted to v1 with a
// deprecation warning; other kinds (Deployments, ...) are skipped with a
// warning; empty documents are ignored. Objects are defaulted and validated
// as Karpenter's CRDs would, and every nodeClassRef must name a loaded
// EC2NodeClass.
//
// On failure the error is an ErrorList holding every problem found (all
// files, all documents), each naming file, line and field path. The returned
// Config is never nil: on failure it still carries the Warnings, but its
// objects must not be used.
func Load(paths ...string) (*Config, error) {
	l := newLoader()
	if len(paths) == 0 {
		l.errs = append(l.errs, FieldError{Message: "no files or directories given"})
	}
	for _, f := range l.expand(paths) {
		data, err := os.ReadFile(f)
		if err != nil {
			l.errs = append(l.errs, FieldError{File: f, Message: readError(err)})
			continue
		}
		l.loadData(f, data)
	}
	return l.finish()
}

// LoadData is Load for in-memory content; name is used in messages.
func LoadData(name string, data []byte) (*Config, error) {
	return LoadNamed(NamedData{Name: name, Data: data})
}

// NamedData is one in-memory file for LoadNamed.
type NamedData struct {
	Name string // used in messages as a file name would be
	Data []byte
}

// LoadNamed is Load for several in-memory files loaded as one set (a
// NodePool in one may reference an EC2NodeClass in another), such as the
// objects read from a cluster, each named as its user knows it.
func LoadNamed(files ...NamedData) (*Config, error) {
	l := newLoader()
	for _, f := range files {
		l.loadData(f.Name, f.Data)
	}
	return l.finish()
}

func readError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

type loader struct {
	cfg      *Config
	errs     ErrorList
	objects  []*loadedObject
	exported exported
}

// loadedObject is one NodePool or EC2NodeClass with what is needed to tie
// later findings back to the file.
type loadedObject struct {
	file  string
	line  int // line of the document's first key
	lines map[string]int
	conv  *conversion // nil for v1 documents
	np    *NodePool
	nc    *EC2NodeClass
	// betaKubelet is a v1beta1 NodePool's template kubelet, moved to its
	// EC2NodeClass once all classes are loaded.
	betaKubelet *KubeletConfiguration
	// decodeErrPaths are fields that failed to decode; validation findings
	// about them would only repeat the decode error.
	decodeErrPaths []string
}

func newLoader() *loader {
	return &loader{cfg: &Config{Sources: map[ObjectKey]Source{}}}
}

func (l *loader) expand(paths []string) []string {
	var files []string
	seen := map[string]bool{}
	add := func(f string) {
		if !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			l.errs = append(l.errs, FieldError{File: p, Message: readError(err)})
			continue
		}
		if !info.IsDir() {
			add(p)
			continue
		}
		before := len(files)
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				l.errs = append(l.errs, FieldError{File: path, Message: readError(err)})
				return nil
			}
			if d.IsDir() {
				if path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".yaml", ".yml", ".json":
				add(path)
			}
			return nil
		})
		if err != nil {
			l.errs = append(l.errs, FieldError{File: p, Message: err.Error()})
		}
		if len(files) == before {
			l.errs = append(l.errs, FieldError{File: p, Message: "no .yaml, .yml or .json files in this directory"})
		}
	}
	return files
}

func (l *loader) loadData(file string, data []byte) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			line, msg := yamlLine(err)
			l.errs = append(l.errs, FieldError{File: file, Line: line, Message: "invalid YAML: " + msg})
			return
		}
		l.loadDocument(file, &doc)
	}
}

func (l *loader) warn(file string, line int, path, format string, args ...any) {
	l.cfg.Warnings = append(l.cfg.Warnings, Warning{File: file, Line: line, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (l *loader) fail(file string, line int, path, format string, args ...any) {
	l.errs = append(l.errs, FieldError{File: file, Line: line, Path: path, Message: fmt.Sprintf(format, args...)})
}

// topScalar returns a top-level scalar field's value and line.
func topScalar(root *yaml.Node, key string) (string, int, bool) {
	v, _ := mappingValue(root, key)
	switch {
	case v == nil:
		return "", 0, false
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str":
		return v.Value, v.Line, true
	}
	return "", v.Line, false
}

// objectName returns metadata.name for messages about skipped documents.
func objectName(root *yaml.Node) string {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k, v := root.Content[i], root.Content[i+1]; k.Value == "metadata" && v.Kind == yaml.MappingNode {
			if name, _, ok := topScalar(v, "name"); ok {
				return " " + fmt.Sprintf("%q", name)
			}
		}
	}
	return ""
}

func (l *loader) loadDocument(file string, doc *yaml.Node) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return
	}
	l.loadObject(file, doc.Content[0])
}

// loadObject loads one object: a document's root or an item of a List.
func (l *loader) loadObject(file string, root *yaml.Node) {
	if isNull(root) {
		return
	}
	if root.Kind != yaml.MappingNode {
		l.fail(file, root.Line, "", "expected a Kubernetes object (a mapping with apiVersion and kind), got %s", describe(root))
		return
	}
	apiVersion, avLine, hasAV := topScalar(root, "apiVersion")
	kind, kindLine, hasKind := topScalar(root, "kind")
	group, version, _ := strings.Cut(apiVersion, "/")
	if !hasAV && !hasKind {
		l.warn(file, root.Line, "", "skipped: not a Kubernetes object (no apiVersion or kind)")
		return
	}
	if !hasAV && (kind == NodePoolKind || kind == EC2NodeClassKind) {
		l.fail(file, root.Line, "apiVersion", "%s (%s or %s)", msgRequired, NodePoolAPIV1, NodeClassAPIV1)
		return
	}
	if !hasKind && (group == Group || group == AWSGroup) {
		l.fail(file, avLine, "kind", "%s (NodePool or EC2NodeClass)", msgRequired)
		return
	}
	t := typeOf{apiVersion: apiVersion, group: group, version: version, kind: kind, avLine: avLine, kindLine: kindLine}
	if isList(t) {
		l.loadList(file, root, t)
		return
	}
	l.loadKind(file, root, t)
}

// typeOf is a document's apiVersion (split into group and version) and kind,
// with the lines they are on.
type typeOf struct {
	apiVersion, group, version, kind string
	avLine, kindLine                 int
}

// loadKind loads a NodePool or EC2NodeClass of a supported version and
// explains everything else: a deprecated version is converted, a kind or
// version nodewright does not configure fails or is skipped.
func (l *loader) loadKind(file string, root *yaml.Node, t typeOf) {
	apiVersion, group, version, kind, avLine, kindLine := t.apiVersion, t.group, t.version, t.kind, t.avLine, t.kindLine
	switch {
	case group == Group && kind == NodePoolKind && version == V1:
		l.loadNodePool(file, root)
	case group == Group && kind == NodePoolKind && version == V1Beta1:
		l.warn(file, avLine, "apiVersion", "%s is deprecated; converted to %s", apiVersion, NodePoolAPIV1)
		l.loadBetaNodePool(file, root)
	case group == AWSGroup && kind == EC2NodeClassKind && version == V1:
		l.loadNodeClass(file, root)
	case group == AWSGroup && kind == EC2NodeClassKind && version == V1Beta1:
		l.warn(file, avLine, "apiVersion", "%s is deprecated; converted to %s", apiVersion, NodeClassAPIV1)
		l.loadBetaNodeClass(file, root)
	case group == Group && kind == NodeClaimKind:
		l.warn(file, root.Line, "", "skipped NodeClaim%s: NodeClaims are created by nodewright, not configured", objectName(root))
	case kind == NodePoolKind || kind == EC2NodeClassKind:
		l.fail(file, avLine, "apiVersion", "%q is not supported for %s (use %s)", apiVersion, kind, map[string]string{NodePoolKind: NodePoolAPIV1, EC2NodeClassKind: NodeClassAPIV1}[kind])
	case group == Group && (kind == "Provisioner" || kind == "Machine"):
		l.fail(file, kindLine, "kind", "%s %s is not supported: migrate it to a %s NodePool", apiVersion, kind, NodePoolAPIV1)
	case group == AWSGroup && kind == "AWSNodeTemplate":
		l.fail(file, kindLine, "kind", "%s %s is not supported: migrate it to a %s EC2NodeClass", apiVersion, kind, NodeClassAPIV1)
	case group == Group || group == AWSGroup:
		l.fail(file, kindLine, "kind", "%s %q is not a kind nodewright configures (NodePool, EC2NodeClass)", apiVersion, kind)
	default:
		l.warn(file, root.Line, "", "skipped %s %s%s: not a NodePool or EC2NodeClass", apiVersion, kind, objectName(root))
	}
}

// decodeInto runs the strict decoder and records its findings on obj.
// unsupportedFields are fields of newer or older Karpenter versions that
// nodewright does not implement; they are still errors (nodewright cannot
// honour them), with a message that says so instead of "did you mean".
var unsupportedFields = map[string]map[string]string{
	NodePoolKind: {
		"spec.template.spec.kubelet":                 "karpenter.sh/v1 keeps kubelet settings on the EC2NodeClass: move them to its spec.kubelet",
		"spec.template.spec.resources":               "resources are computed per NodeClaim and cannot be set on a NodePool",
		"spec.disruption.expireAfter":                "moved to spec.template.spec.expireAfter in karpenter.sh/v1",
		"spec.template.spec.nodeClassRef.apiVersion": "karpenter.sh/v1 uses group (karpenter.k8s.aws) instead of apiVersion",
	},
	EC2NodeClassKind: {
		"spec.subnetSelectorTerms[].cidr": "cidr subnet selection is not supported by nodewright; use id or tags",
	},
}

func (l *loader) decodeInto(file string, root *yaml.Node, target any) *loadedObject {
	d := newDecoder(file)
	kind := NodePoolKind
	if _, ok := target.(*EC2NodeClass); ok {
		kind = EC2NodeClassKind
	} else if _, ok := target.(*betaEC2NodeClass); ok {
		kind = EC2NodeClassKind
	}
	d.hints = unsupportedFields[kind]
	l.stripExported(file, root)
	d.decode(root, reflect.ValueOf(target).Elem(), "")
	obj := &loadedObject{file: file, line: root.Line, lines: d.lines}
	for _, e := range d.errs {
		obj.decodeErrPaths = append(obj.decodeErrPaths, e.Path)
	}
	l.errs = append(l.errs, d.errs...)
	return obj
}

// decodeBeta decodes a v1beta1 document into beta and starts the record of
// its conversion to v1.
func (l *loader) decodeBeta(file string, root *yaml.Node, beta any) *loadedObject {
	obj := l.decodeInto(file, root, beta)
	obj.conv = newConversion()
	return obj
}

func (l *loader) loadNodePool(file string, root *yaml.Node) {
	np := &NodePool{}
	obj := l.decodeInto(file, root, np)
	obj.np = np
	var pre []fieldErr
	if obj.present("spec.disruption") && np.Spec.Disruption.ConsolidateAfter.IsZero() {
		pre = append(pre, fieldErr{path: "spec.disruption.consolidateAfter", msg: msgRequired + " (a duration such as 0s, 30s, 5m, or Never)"})
	}
	np.SetDefaults()
	l.report(obj, append(pre, validateNodePool(np)...))
	l.reportWarnings(obj, lintNodePool(np))
	np.exclusiveOperators()
	l.add(obj)
}

func (l *loader) loadBetaNodePool(file string, root *yaml.Node) {
	beta := &betaNodePool{}
	obj := l.decodeBeta(file, root, beta)
	np, kubelet := convertNodePool(beta, obj.present, obj.conv)
	obj.np, obj.betaKubelet = np, kubelet
	np.SetDefaults()
	errs := slices.Clone(obj.conv.errs)
	if beta.Spec.Disruption != nil && beta.Spec.Disruption.ConsolidationPolicy != "" &&
		beta.Spec.Disruption.ConsolidationPolicy != consolidationPolicyWhenUnderutilizedBeta &&
		beta.Spec.Disruption.ConsolidationPolicy != ConsolidationPolicyWhenEmpty {
		errs = append(errs, fieldErr{path: "spec.disruption.consolidationPolicy", msg: fmt.Sprintf("%q is not one of WhenEmpty, WhenUnderutilized", beta.Spec.Disruption.ConsolidationPolicy)})
		np.Spec.Disruption.ConsolidationPolicy = DefaultConsolidationPolicy
	}
	errs = append(errs, validateNodePool(np)...)
	if kubelet != nil {
		v := &validator{}
		validateKubelet(v, "spec.template.spec.kubelet", kubelet)
		errs = append(errs, v.errs...)
	}
	l.reportWarnings(obj, obj.conv.warnings)
	l.reportWarnings(obj, lintNodePool(np))
	l.report(obj, errs)
	l.add(obj)
}

func (l *loader) loadNodeClass(file string, root *yaml.Node) {
	nc := &EC2NodeClass{}
	obj := l.decodeInto(file, root, nc)
	obj.nc = nc
	nc.SetDefaults()
	l.report(obj, validateEC2NodeClass(nc))
	l.add(obj)
}

func (l *loader) loadBetaNodeClass(file string, root *yaml.Node) {
	beta := &betaEC2NodeClass{}
	obj := l.decodeBeta(file, root, beta)
	nc := convertEC2NodeClass(beta, obj.present, obj.conv)
	obj.nc = nc
	nc.SetDefaults()
	errs := slices.Clone(obj.conv.errs)
	for _, e := range validateEC2NodeClass(nc) {
		// A conversion error already explains a missing or unusable family.
		if len(obj.conv.errs) > 0 && (e.path == "spec.amiFamily" || e.path == "spec.amiSelectorTerms") {
			continue
		}
		errs = append(errs, e)
	}
	l.reportWarnings(obj, obj.conv.warnings)
	l.report(obj, errs)
	l.add(obj)
}

func (o *loadedObject) present(path string) bool {
	_, ok := o.lines[path]
	return ok
}

// lineOf returns the line of path or of its nearest written ancestor.
func (o *loadedObject) lineOf(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := o.lines[p]; ok && l > 0 {
			return l
		}
	}
	return o.line
}

func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

func (o *loadedObject) kind() string {
	if o.np != nil {
		return NodePoolKind
	}
	return EC2NodeClassKind
}

func (o *loadedObject) name() string {
	if o.np != nil {
		return o.np.Name
	}
	return o.nc.Name
}

// coveredByDecodeError reports whether a decode error already concerns path
// (the field, one of its ancestors, or one of its children).
func (o *loadedObject) coveredByDecodeError(path string) bool {
	for _, d := range o.decodeErrPaths {
		if d == path || isUnder(path, d) || isUnder(d, path) {
			return true
		}
	}
	return false
}

func isUnder(path, ancestor string) bool {
	if ancestor == "" {
		return true
	}
	return strings.HasPrefix(path, ancestor+".") || strings.HasPrefix(path, ancestor+"[")
}

func (l *loader) report(o *loadedObject, errs []fieldErr) {
	for _, e := range errs {
		path := o.conv.original(e.path)
		if o.coveredByDecodeError(path) {
			continue
		}
		l.fail(o.file, o.lineOf(path), path, "%s", e.msg)
	}
}

func (l *loader) reportWarnings(o *loadedObject, ws []fieldErr) {
	for _, w := range ws {
		path := o.conv.original(w.path)
		l.warn(o.file, o.lineOf(path), path, "%s", w.msg)
	}
}

func (l *loader) add(o *loadedObject) {
	if o.present("metadata.namespace") {
		l.warn(o.file, o.lineOf("metadata.namespace"), "metadata.namespace", "ignored: %s is cluster-scoped", o.kind())
	}
	if o.name() != "" {
		for _, prev := range l.objects {
			if prev.kind() == o.kind() && prev.name() == o.name() {
				l.fail(o.file, o.lineOf("metadata.name"), "metadata.name", "%s %q is already defined at %s:%d", o.kind(), o.name(), prev.file, prev.lineOf("metadata.name"))
				return
			}
		}
	}
	l.objects = append(l.objects, o)
}

// finish resolves references between objects, moves v1beta1 kubelet
// settings to their EC2NodeClass, and assembles the Config.
func (l *loader) finish() (*Config, error) {
	classes := map[string]*loadedObject{}
	for _, o := range l.objects {
		if o.nc != nil {
			classes[o.nc.Name] = o
		}
	}
	kubeletFrom := map[string]string{} // class name -> pool that supplied its kubelet
	for _, o := range l.objects {
		if o.np == nil {
			continue
		}
		ref := o.np.Spec.Template.Spec.NodeClassRef
		if ref == nil || ref.Name == "" || ref.Group != AWSGroup || ref.Kind != EC2NodeClassKind {
			continue // reported by validation
		}
		cls, ok := classes[ref.Name]
		if !ok {
			path := o.conv.original("spec.template.spec.nodeClassRef.name")
			l.fail(o.file, o.lineOf(path), path, "EC2NodeClass %q is not defined in the loaded files", ref.Name)
			continue
		}
		if o.betaKubelet == nil {
			continue
		}
		const kp = "spec.template.spec.kubelet"
		switch {
		case cls.nc.Spec.Kubelet == nil:
			cls.nc.Spec.Kubelet = o.betaKubelet.DeepCopy()
			kubeletFrom[ref.Name] = o.np.Name
			l.warn(o.file, o.lineOf(kp), kp, "moved to EC2NodeClass %q spec.kubelet (karpenter.sh/v1 keeps kubelet settings on the EC2NodeClass)", ref.Name)
		case equality.Semantic.DeepEqual(cls.nc.Spec.Kubelet, o.betaKubelet):
			l.warn(o.file, o.lineOf(kp), kp, "moved to EC2NodeClass %q spec.kubelet (karpenter.sh/v1 keeps kubelet settings on the EC2NodeClass)", ref.Name)
		default:
			from := fmt.Sprintf("EC2NodeClass %q", ref.Name)
			if pool, ok := kubeletFrom[ref.Name]; ok {
				from = fmt.Sprintf("NodePool %q", pool)
			}
			l.fail(o.file, o.lineOf(kp), kp, "differs from the kubelet settings of %s; karpenter.sh/v1 keeps kubelet on the EC2NodeClass, so give this NodePool its own EC2NodeClass", from)
		}
	}
	for _, o := range l.objects {
		src := Source{File: o.file, Line: o.line}
		if o.np != nil {
			l.cfg.NodePools = append(l.cfg.NodePools, o.np)
			src.APIVersion = NodePoolAPIV1
			if o.conv != nil {
				src.APIVersion = NodePoolAPIBeta
			}
		} else {
			l.cfg.NodeClasses = append(l.cfg.NodeClasses, o.nc)
			src.APIVersion = NodeClassAPIV1
			if o.conv != nil {
				src.APIVersion = NodeClassAPIBeta
			}
		}
		l.cfg.Sources[ObjectKey{Kind: o.kind(), Name: o.name()}] = src
	}
	l.exportedWarning()
	if len(l.errs) == 0 {
		return l.cfg, nil
	}
	slices.SortStableFunc(l.errs, func(a, b FieldError) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	return l.cfg, l.errs
}
