package apis

import (
	"fmt"
	"strings"
)

// Config is the set of NodePools and EC2NodeClasses loaded from the user's
// files, already defaulted, converted to v1 and validated.
type Config struct {
	NodePools   []*NodePool
	NodeClasses []*EC2NodeClass
	// Warnings are non-fatal findings (deprecations, skipped documents).
	Warnings []Warning
	// Sources says where each object came from, keyed by ObjectKey.
	Sources map[ObjectKey]Source
}

// ObjectKey identifies a loaded object.
type ObjectKey struct {
	Kind string
	Name string
}

// Source is where an object was read from.
type Source struct {
	File string
	Line int
	// APIVersion is the version as written (v1beta1 objects are converted).
	APIVersion string
}

// NodePool returns the pool with that name, or nil.
func (c *Config) NodePool(name string) *NodePool {
	for _, np := range c.NodePools {
		if np.Name == name {
			return np
		}
	}
	return nil
}

// NodeClass returns the EC2NodeClass with that name, or nil.
func (c *Config) NodeClass(name string) *EC2NodeClass {
	for _, nc := range c.NodeClasses {
		if nc.Name == name {
			return nc
		}
	}
	return nil
}

// NodeClassFor returns the EC2NodeClass a NodePool references, or nil.
func (c *Config) NodeClassFor(np *NodePool) *EC2NodeClass {
	if np.Spec.Template.Spec.NodeClassRef == nil {
		return nil
	}
	return c.NodeClass(np.Spec.Template.Spec.NodeClassRef.Name)
}

// FieldError is one problem with one field of one document.
type FieldError struct {
	File    string // as given to Load (relative paths stay relative)
	Line    int    // 1-based; 0 when unknown
	Path    string // field path, e.g. spec.template.spec.requirements[2].operator
	Message string
}

func (e FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ErrorList is every error Load found, in file then line order. Load returns
// it as its error so callers can print each entry on its own line.
type ErrorList []FieldError

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Warning is a non-fatal finding; it prints like a FieldError.
type Warning FieldError

func (w Warning) String() string { return FieldError(w).Error() }
