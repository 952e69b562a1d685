package apis

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Objects exported from a cluster (`kubectl get nodepools,ec2nodeclasses -o
// yaml`) come as a `kind: List` whose items carry the controller's status and
// metadata the API server wrote. Users migrating from Karpenter have such
// files, so the loader reads them item by item and drops what was written
// for them rather than by them. One warning per load says so: a per-object
// warning would bury real findings under dozens of identical lines.

// serverSetMetadata are metadata fields set by the API server or by
// controllers (Karpenter adds finalizers); none of them is configuration.
var serverSetMetadata = []string{
	"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "finalizers", "selfLink",
}

// serverSetAnnotations are annotations written by kubectl apply and by
// Karpenter's own controllers (drift hashes of the stored object).
var serverSetAnnotations = []string{
	"kubectl.kubernetes.io/last-applied-configuration",
	"karpenter.sh/nodepool-hash",
	"karpenter.sh/nodepool-hash-version",
	"karpenter.k8s.aws/ec2nodeclass-hash",
	"karpenter.k8s.aws/ec2nodeclass-hash-version",
}

// exported collects what was dropped from exported objects, for the one
// warning of a load.
type exported struct {
	file    string // where the first dropped field was
	line    int
	path    string
	objects int
	fields  map[string]bool
}

// isList reports whether a document is a list of objects: kubectl prints
// `apiVersion: v1, kind: List`; the API itself returns e.g. NodePoolList.
func isList(t typeOf) bool {
	switch {
	case t.apiVersion == "v1" && t.kind == "List":
		return true
	case t.group == Group || t.group == AWSGroup:
		return strings.HasSuffix(t.kind, "List")
	}
	return false
}

// loadList loads each entry of a list document's items as its own object.
// Lines stay those of the file, and field paths those of the item, so
// messages point where the user looks.
func (l *loader) loadList(file string, root *yaml.Node, t typeOf) {
	items, line := mappingValue(root, "items")
	switch {
	case items == nil:
		l.warn(file, t.kindLine, "items", "skipped %s: it has no items", t.kind)
		return
	case isNull(items):
		return
	case items.Kind != yaml.SequenceNode:
		l.fail(file, line, "items", "expected a list, got %s", describe(items))
		return
	}
	for _, item := range items.Content {
		if item.Kind == yaml.AliasNode && item.Alias != nil {
			item = item.Alias
		}
		if item.Kind == yaml.MappingNode && itemIsList(item) {
			l.fail(file, item.Line, "items", "a list inside a list is not supported")
			continue
		}
		l.loadObject(file, item)
	}
}

func itemIsList(item *yaml.Node) bool {
	kind, _, _ := topScalar(item, "kind")
	apiVersion, _, _ := topScalar(item, "apiVersion")
	group, version, _ := strings.Cut(apiVersion, "/")
	return isList(typeOf{apiVersion: apiVersion, group: group, version: version, kind: kind})
}

// mappingValue returns the value of key in a mapping, with the key's line.
func mappingValue(m *yaml.Node, key string) (*yaml.Node, int) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			v := m.Content[i+1]
			if v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			return v, k.Line
		}
	}
	return nil, 0
}

// removeKey deletes key from a mapping and returns its line (0 if absent).
func removeKey(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			m.Content = append(m.Content[:i:i], m.Content[i+2:]...)
			return k.Line
		}
	}
	return 0
}

// StrippedField is a field StripServerSet removed, with the line it was on.
type StrippedField struct {
	Path string
	Line int
}

// StripServerSet removes status and the metadata the API server and
// controllers write (uid, resourceVersion, managedFields, finalizers,
// Karpenter's hash annotations, ...) from an object, so what remains is the
// configuration a person wrote. The loader drops the same fields from
// exported objects; `nodewright import` uses it to write clean files.
func StripServerSet(root *yaml.Node) []StrippedField {
	var dropped []StrippedField
	note := func(path string, line int) {
		if line != 0 {
			dropped = append(dropped, StrippedField{Path: path, Line: line})
		}
	}
	if meta, _ := mappingValue(root, "metadata"); meta != nil && meta.Kind == yaml.MappingNode {
		for _, f := range serverSetMetadata {
			note("metadata."+f, removeKey(meta, f))
		}
		if ann, _ := mappingValue(meta, "annotations"); ann != nil && ann.Kind == yaml.MappingNode {
			for _, a := range serverSetAnnotations {
				note(joinKey("metadata.annotations", a), removeKey(ann, a))
			}
			if len(ann.Content) == 0 {
				removeKey(meta, "annotations")
			}
		}
	}
	note("status", removeKey(root, "status"))
	return dropped
}

// stripExported removes status and server-set metadata from an object
// before it is decoded, and records them for the load's warning.
func (l *loader) stripExported(file string, root *yaml.Node) {
	dropped := StripServerSet(root)
	if len(dropped) == 0 {
		return
	}
	first := slices.MinFunc(dropped, func(a, b StrippedField) int { return a.Line - b.Line })
	if l.exported.objects == 0 {
		l.exported = exported{file: file, line: first.Line, path: first.Path, fields: map[string]bool{}}
	}
	l.exported.objects++
	for _, d := range dropped {
		l.exported.fields[d.Path] = true
	}
}

// exportedWarning is the one warning about dropped status and metadata.
func (l *loader) exportedWarning() {
	e := l.exported
	if e.objects == 0 {
		return
	}
	fields := slices.Sorted(maps.Keys(e.fields))
	objects := "1 object"
	if e.objects > 1 {
		objects = fmt.Sprintf("%d objects", e.objects)
	}
	l.warn(e.file, e.line, e.path, "ignored in %s: %s (written by the API server and controllers, not configuration)", objects, strings.Join(fields, ", "))
}
