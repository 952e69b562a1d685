package apis

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxNodesPerDocument bounds the work one document may cause: YAML aliases
// can make a small file expand exponentially ("billion laughs").
const maxNodesPerDocument = 100_000

// fieldErr is a problem at a field path, before it is tied to a file and line.
type fieldErr struct {
	path string
	msg  string
}

// decoder maps a yaml.v3 node tree onto Go values strictly, using the
// values' json tags, so every field can be tied back to its line. It keeps
// going after an error so that all of a document's problems are reported.
type decoder struct {
	errs  []FieldError
	file  string
	lines map[string]int // field path -> line of its value
	// visits counts nodes walked, against maxNodesPerDocument.
	visits   int
	tooLarge bool
	// active holds the alias targets being expanded, to stop cycles.
	active map[*yaml.Node]bool
	// hints explain unknown fields that exist in some Karpenter version,
	// keyed by field path without list indices.
	hints map[string]string
}

// indexless drops list indices from a field path ("a[0].b" -> "a[].b") but
// keeps map keys, which are not purely numeric.
func indexless(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '[' {
			j := i + 1
			for j < len(path) && path[j] >= '0' && path[j] <= '9' {
				j++
			}
			if j > i+1 && j < len(path) && path[j] == ']' {
				b.WriteString("[]")
				i = j
				continue
			}
		}
		b.WriteByte(path[i])
	}
	return b.String()
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, lines: map[string]int{}, active: map[*yaml.Node]bool{}}
}

func (d *decoder) fail(line int, path, format string, args ...any) {
	d.errs = append(d.errs, FieldError{File: d.file, Line: line, Path: path, Message: fmt.Sprintf(format, args...)})
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func joinIndex(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func joinKey(path, key string) string { return path + "[" + key + "]" }

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// enter resolves aliases and charges the node budget; ok is false when the
// node must not be walked (budget exhausted or alias cycle).
func (d *decoder) enter(n *yaml.Node, path string) (*yaml.Node, func(), bool) {
	d.visits++
	if d.visits > maxNodesPerDocument {
		if !d.tooLarge {
			d.tooLarge = true
			d.fail(n.Line, path, "document too large (more than %d YAML nodes after expanding aliases)", maxNodesPerDocument)
		}
		return nil, nil, false
	}
	if n.Kind != yaml.AliasNode {
		return n, func() {}, true
	}
	target := n.Alias
	if target == nil || d.active[target] {
		d.fail(n.Line, path, "alias %q refers to a node that contains it", n.Value)
		return nil, nil, false
	}
	d.active[target] = true
	return target, func() { delete(d.active, target) }, true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// decode sets v from n; path is n's field path.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n, leave, ok := d.enter(n, path)
	if !ok {
		return
	}
	defer leave()
	if _, seen := d.lines[path]; !seen {
		d.lines[path] = n.Line
	}
	if isNull(n) {
		v.Set(reflect.Zero(v.Type()))
		return
	}
	if v.Kind() != reflect.Pointer && v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		d.decodeUnmarshaler(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.String:
		if s, ok := d.scalarString(n, path); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.fail(n.Line, path, "expected true or false, got %s", describe(n))
			return
		}
		b, err := strconv.ParseBool(n.Value)
		if err != nil {
			d.fail(n.Line, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.fail(n.Line, path, "expected an integer, got %s", describe(n))
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, v.Type().Bits())
		if err != nil {
			d.fail(n.Line, path, "integer %s is out of range", n.Value)
			return
		}
		v.SetInt(i)
	default:
		// Only the types in this package reach here; a new field kind is a
		// programming error that tests catch.
		d.fail(n.Line, path, "internal error: cannot decode into %s", v.Type())
	}
}

// scalarString accepts only string scalars: Kubernetes rejects `nodes: 10`
// for a string field, so nodewright does too, with a hint to quote it.
func (d *decoder) scalarString(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n.Line, path, "expected a string, got %s", describe(n))
		return "", false
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, true
	case "!!int", "!!float", "!!bool":
		d.fail(n.Line, path, "expected a string, got %s (quote it: %q)", describe(n), n.Value)
		return "", false
	}
	d.fail(n.Line, path, "expected a string, got %s", describe(n))
	return "", false
}

// describe names a node's kind and value for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		case "!!bool":
			return "boolean " + n.Value
		case "!!null":
			return "null"
		case "!!str":
			return strconv.Quote(n.Value)
		}
		return fmt.Sprintf("%s %q", n.ShortTag(), n.Value)
	}
	return "an unsupported YAML node"
}

func (d *decoder) decodeUnmarshaler(n *yaml.Node, v reflect.Value, path string) {
	raw, ok := d.toJSONValue(n, path)
	if !ok {
		return
	}
	b, err := json.Marshal(raw)
	if err != nil {
		d.fail(n.Line, path, "cannot convert value to JSON: %v", err)
		return
	}
	target := reflect.New(v.Type())
	if err := target.Interface().(json.Unmarshaler).UnmarshalJSON(b); err != nil {
		d.fail(n.Line, path, "%s", unmarshalMessage(v.Type(), n, err))
		return
	}
	v.Set(target.Elem())
}

var (
	quantityType = reflect.TypeFor[resource.Quantity]()
	durationType = reflect.TypeFor[metav1.Duration]()
	timeType     = reflect.TypeFor[metav1.Time]()
)

func unmarshalMessage(t reflect.Type, n *yaml.Node, err error) string {
	switch t {
	case quantityType:
		return fmt.Sprintf("%s is not a quantity (e.g. 1000, 500m, 2Gi)", describe(n))
	case durationType:
		return fmt.Sprintf("%s is not a duration (e.g. 30s, 5m, 1h30m)", describe(n))
	case timeType:
		return fmt.Sprintf("%s is not an RFC 3339 time", describe(n))
	}
	return err.Error()
}

// toJSONValue converts a node to the value sigs.k8s.io/yaml would produce.
func (d *decoder) toJSONValue(n *yaml.Node, path string) (any, bool) {
	n, leave, ok := d.enter(n, path)
	if !ok {
		return nil, false
	}
	defer leave()
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, true
		case "!!bool":
			b, err := strconv.ParseBool(n.Value)
			if err != nil {
				return n.Value, true
			}
			return b, true
		case "!!int":
			if i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64); err == nil {
				return i, true
			}
			return n.Value, true
		case "!!float":
			f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return n.Value, true
			}
			return f, true
		}
		return n.Value, true
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, ok := d.toJSONValue(c, joinIndex(path, i))
			if !ok {
				return nil, false
			}
			out = append(out, v)
		}
		return out, true
	case yaml.MappingNode:
		out := map[string]any{}
		for _, p := range d.pairs(n, path) {
			v, ok := d.toJSONValue(p.value, joinField(path, p.key))
			if !ok {
				return nil, false
			}
			out[p.key] = v
		}
		return out, true
	}
	d.fail(n.Line, path, "unsupported YAML node")
	return nil, false
}

type pair struct {
	key   string
	keyN  *yaml.Node
	value *yaml.Node
}

// pairs lists a mapping's entries with YAML merge keys (<<) expanded;
// explicit keys win over merged ones, and repeated explicit keys are errors
// (Kubernetes rejects them too).
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var out []pair
	seen := map[string]int{}
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergePairs(v, path)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, path, "mapping keys must be strings, got %s", describe(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k.Line, joinField(path, k.Value), "duplicate field (first set on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, pair{key: k.Value, keyN: k, value: v})
	}
	for _, p := range merged {
		if _, dup := seen[p.key]; dup {
			continue
		}
		seen[p.key] = p.keyN.Line
		out = append(out, p)
	}
	return out
}

func (d *decoder) mergePairs(v *yaml.Node, path string) []pair {
	v, leave, ok := d.enter(v, path)
	if !ok {
		return nil
	}
	defer leave()
	switch v.Kind {
	case yaml.MappingNode:
		return d.pairs(v, path)
	case yaml.SequenceNode:
		var out []pair
		for _, c := range v.Content {
			out = append(out, d.mergePairs(c, path)...)
		}
		return out
	}
	d.fail(v.Line, path, "merge key (<<) needs a mapping, got %s", describe(v))
	return nil
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "expected an object, got %s", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.fail(n.Line, path, "internal error: map key type %s", v.Type().Key())
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	for _, p := range d.pairs(n, path) {
		ev := reflect.New(v.Type().Elem()).Elem()
		d.lines[joinKey(path, p.key)] = p.keyN.Line
		d.decode(p.value, ev, joinKey(path, p.key))
		m.SetMapIndex(reflect.ValueOf(p.key).Convert(v.Type().Key()), ev)
	}
	v.Set(m)
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n.Line, path, "expected a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, c := range n.Content {
		d.decode(c, s.Index(i), joinIndex(path, i))
	}
	v.Set(s)
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "expected an object, got %s", describe(n))
		return
	}
	fields := fieldsOf(v.Type())
	for _, p := range d.pairs(n, path) {
		fpath := joinField(path, p.key)
		idx, ok := fields.byName[p.key]
		if !ok {
			msg := "unknown field"
			if hint, ok := d.hints[indexless(fpath)]; ok {
				msg += ": " + hint
			} else if s := suggest(p.key, fields.names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.fail(p.keyN.Line, fpath, "%s", msg)
			continue
		}
		// A field's line is its key's: for a nested object that is the
		// "field:" line, not the line of the object's first entry.
		d.lines[fpath] = p.keyN.Line
		fv := v.FieldByIndex(idx)
		d.decode(p.value, fv, fpath)
	}
}

type structFields struct {
	byName map[string][]int
	names  []string
}

var fieldCache sync.Map // reflect.Type -> *structFields

// fieldsOf lists a struct's JSON field names, with embedded structs that
// have no JSON name (metav1.TypeMeta `json:",inline"`) flattened in.
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	sf := &structFields{byName: map[string][]int{}}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), prefix...), i)
			if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			sf.byName[name] = idx
			sf.names = append(sf.names, name)
		}
	}
	walk(t, nil)
	sort.Strings(sf.names)
	fieldCache.Store(t, sf)
	return sf
}

// suggest returns the known name closest to a misspelt one, if close enough.
func suggest(name string, names []string) string {
	best, bestD := "", 3
	for _, c := range names {
		if strings.EqualFold(c, name) {
			return c
		}
		if dist := editDistance(strings.ToLower(name), strings.ToLower(c)); dist < bestD {
			best, bestD = c, dist
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// parserProblems are yaml.v3's parser (not scanner) errors. yaml.v3 reports
// their line 0-based while scanner errors are 1-based, so they need +1.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// yamlLine extracts the 1-based line from a yaml.v3 parse error
// ("yaml: line 5: ...").
func yamlLine(err error) (int, string) {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		num, tail, found := strings.Cut(rest, ": ")
		if l, err := strconv.Atoi(num); err == nil && found {
			if parserProblems[tail] {
				l++
			}
			return l, tail
		}
	}
	return 0, msg
}
