package livecluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/apis"
)

// The Karpenter resources nodewright is configured with, as the cluster
// serves them (the API server converts stored v1beta1 objects).
var (
	NodePools      = schema.GroupVersionResource{Group: apis.Group, Version: apis.V1, Resource: "nodepools"}
	EC2NodeClasses = schema.GroupVersionResource{Group: apis.AWSGroup, Version: apis.V1, Resource: "ec2nodeclasses"}
	NodeClaims     = schema.GroupVersionResource{Group: apis.Group, Version: apis.V1, Resource: "nodeclaims"}
)

// Object is one NodePool or EC2NodeClass as a file holds it: status and
// server-set metadata stripped (apis.StripServerSet).
type Object struct {
	Kind string // apis.NodePoolKind or apis.EC2NodeClassKind
	Name string
	// File is the file name `import` writes it to: <kind>-<name>.yaml.
	File string
	// Ref names it as kubectl does (nodepool.karpenter.sh/default), the
	// file name in messages when it is loaded without being written.
	Ref  string
	YAML []byte
}

// ReadKarpenter lists the cluster's NodePools and EC2NodeClasses, NodePools
// first, each sorted by name.
func ReadKarpenter(ctx context.Context, dyn dynamic.Interface) ([]Object, error) {
	var out []Object
	for _, r := range []struct {
		gvr  schema.GroupVersionResource
		kind string
	}{{NodePools, apis.NodePoolKind}, {EC2NodeClasses, apis.EC2NodeClassKind}} {
		items, err := listAll(ctx, dyn.Resource(r.gvr))
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("the cluster does not serve %s.%s/%s (are Karpenter's CRDs installed?): %w", r.gvr.Resource, r.gvr.Group, r.gvr.Version, err)
			}
			return nil, fmt.Errorf("list %s.%s: %w", r.gvr.Resource, r.gvr.Group, err)
		}
		for _, u := range items {
			o, err := object(r.kind, r.gvr, u)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
	}
	return out, nil
}

func listAll(ctx context.Context, ri dynamic.ResourceInterface) ([]unstructured.Unstructured, error) {
	var items []unstructured.Unstructured
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := ri.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		items = append(items, l.Items...)
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			break
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
	return items, nil
}

// object renders one listed object as the YAML a person would keep:
// apiVersion, kind, metadata, spec, without what the API server and
// Karpenter wrote.
func object(kind string, gvr schema.GroupVersionResource, u unstructured.Unstructured) (Object, error) {
	name := u.GetName()
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return Object{}, fmt.Errorf("%s %q: not a name a file can carry", kind, name)
	}
	where := fmt.Sprintf("%s %s", kind, name)
	// JSON -> YAML with sorted keys: apiVersion, kind, metadata, spec, status.
	raw, err := sigsyaml.Marshal(u.Object)
	if err != nil {
		return Object{}, fmt.Errorf("%s: %w", where, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return Object{}, fmt.Errorf("%s: re-read as YAML: %w", where, err)
	}
	if len(doc.Content) != 1 {
		return Object{}, fmt.Errorf("%s: empty object", where)
	}
	apis.StripServerSet(doc.Content[0])
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return Object{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := enc.Close(); err != nil {
		return Object{}, fmt.Errorf("%s: %w", where, err)
	}
	lower := strings.ToLower(kind)
	return Object{
		Kind: kind, Name: name, File: lower + "-" + name + ".yaml",
		Ref:  lower + "." + gvr.Group + "/" + name,
		YAML: b.Bytes(),
	}, nil
}

// LoadObjects loads the objects as one configuration, each named by its Ref, so
// warnings and errors read nodepool.karpenter.sh/default:12: field: message
// (the line is the one `import` writes).
func LoadObjects(objs []Object) (*apis.Config, error) {
	files := make([]apis.NamedData, len(objs))
	for i, o := range objs {
		files[i] = apis.NamedData{Name: o.Ref, Data: o.YAML}
	}
	return apis.LoadNamed(files...)
}

// ReadNodeClaims lists Karpenter's NodeClaims, so a plan made beside a
// running Karpenter counts the nodes it is launching (a claim without a
// Node yet offers its capacity, as nodewright's own claims do). A cluster
// without the CRD, or a user without the right to list it, yields none,
// with a warning for the latter.
func ReadNodeClaims(ctx context.Context, dyn dynamic.Interface) ([]*apis.NodeClaim, []string, error) {
	items, err := listAll(ctx, dyn.Resource(NodeClaims))
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, nil
	case apierrors.IsForbidden(err):
		return nil, []string{"nodeclaims.karpenter.sh not counted (listing them is forbidden): nodes Karpenter is launching are not seen as capacity"}, nil
	case err != nil:
		return nil, nil, fmt.Errorf("list nodeclaims.karpenter.sh: %w", err)
	}
	var claims []*apis.NodeClaim
	var warnings []string
	for _, u := range items {
		cl := &apis.NodeClaim{}
		raw, err := json.Marshal(u.Object)
		if err == nil {
			err = json.Unmarshal(raw, cl)
		}
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("NodeClaim %s not counted: %v", u.GetName(), err))
			continue
		}
		claims = append(claims, cl)
	}
	return claims, warnings, nil
}
