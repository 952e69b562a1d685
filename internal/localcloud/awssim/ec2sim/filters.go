package ec2sim

import (
	"iter"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// attrs returns the values of a filter name for one resource; ok=false means
// the filter name is not supported for this resource type.
type attrs func(name string) (values []string, ok bool)

// matchFilters applies EC2 filter semantics: filters are ANDed, the values of
// one filter ORed, and values may use * and ? wildcards.
func matchFilters(filters []types.Filter, get attrs) (bool, error) {
	for _, f := range filters {
		name := aws.ToString(f.Name)
		have, ok := get(name)
		if !ok {
			return false, protocol.Errorf("InvalidParameterValue", "The filter '%s' is invalid", name)
		}
		if !anyMatch(f.Values, have) {
			return false, nil
		}
	}
	return true, nil
}

func anyMatch(patterns, have []string) bool {
	for _, p := range patterns {
		// Most filter values are literal (a claim's tag, an ID): compared
		// as they are, without building a pattern per resource (a scale
		// test's DescribeInstances weighs thousands of instances).
		match := func(h string) bool { return h == p }
		if strings.ContainsAny(p, "*?") {
			pattern := escapeMatch(p)
			match = func(h string) bool { ok, _ := path.Match(pattern, h); return ok }
		}
		if slices.ContainsFunc(have, match) {
			return true
		}
	}
	return false
}

// matchEscaper escapes path.Match's special characters other than EC2's
// wildcards; a Replacer is safe for concurrent use.
var matchEscaper = strings.NewReplacer(`[`, `\[`, `]`, `\]`, `\`, `\\`)

// escapeMatch keeps EC2's wildcards (* and ?) and escapes path.Match's others.
func escapeMatch(p string) string { return matchEscaper.Replace(p) }

// tagAttrs answers the tag:<key>, tag-key and tag-value filters.
func tagAttrs(tags []types.Tag, name string) ([]string, bool) {
	switch {
	case strings.HasPrefix(name, "tag:"):
		key := strings.TrimPrefix(name, "tag:")
		for _, t := range tags {
			if aws.ToString(t.Key) == key {
				return []string{aws.ToString(t.Value)}, true
			}
		}
		return nil, true
	case name == "tag-key":
		var ks []string
		for _, t := range tags {
			ks = append(ks, aws.ToString(t.Key))
		}
		return ks, true
	case name == "tag-value":
		var vs []string
		for _, t := range tags {
			vs = append(vs, aws.ToString(t.Value))
		}
		return vs, true
	}
	return nil, false
}

func one(s *string) []string { return []string{aws.ToString(s)} }

// mergeTags sets tags on a tag list, replacing values of existing keys.
func mergeTags(tags []types.Tag, add []types.Tag) []types.Tag {
	for _, a := range add {
		replaced := false
		for i := range tags {
			if aws.ToString(tags[i].Key) == aws.ToString(a.Key) {
				tags[i].Value = a.Value
				replaced = true
			}
		}
		if !replaced {
			tags = append(tags, types.Tag{Key: a.Key, Value: a.Value})
		}
	}
	return tags
}

// tagsFor collects the tags of TagSpecifications for one resource type.
func tagsFor(specs []types.TagSpecification, rt types.ResourceType) []types.Tag {
	var out []types.Tag
	for _, s := range specs {
		if s.ResourceType == rt {
			out = mergeTags(out, s.Tags)
		}
	}
	return out
}

// page slices n items for MaxResults/NextToken pagination; tokens are offsets.
func page(n int, maxResults *int32, nextToken *string, lo, hi int32) (start, end int, next *string, err error) {
	if nextToken != nil && *nextToken != "" {
		start, err = strconv.Atoi(strings.TrimPrefix(*nextToken, "tok-"))
		if err != nil || start < 0 || start > n {
			return 0, 0, nil, protocol.Errorf("InvalidNextToken", "The token '%s' is invalid", *nextToken)
		}
	}
	end = n
	if maxResults != nil {
		m := *maxResults
		if m < lo || m > hi {
			return 0, 0, nil, protocol.Errorf("InvalidParameterValue", "MaxResults must be between %d and %d, got %d", lo, hi, m)
		}
		if start+int(m) < n {
			end = start + int(m)
			next = aws.String("tok-" + strconv.Itoa(end))
		}
	}
	return start, end, next, nil
}

// paging is a Describe call's MaxResults and NextToken with the range
// (lo..hi) EC2 allows MaxResults in for that call.
type paging struct {
	maxResults *int32
	nextToken  *string
	lo, hi     int32
}

// describe is what every paginated Describe call shares: it keeps the
// candidates whose filter values (attrs) the filters match, in order, and
// answers the page p selects, with the next page's token, through output.
func describe[T, O any](filters []types.Filter, p paging, candidates iter.Seq2[T, attrs], output func(items []T, next *string) *O) (*O, error) {
	var out []T
	for item, get := range candidates {
		if err := appendMatch(&out, filters, get, item); err != nil {
			return nil, err
		}
	}
	start, end, next, err := page(len(out), p.maxResults, p.nextToken, p.lo, p.hi)
	if err != nil {
		return nil, err
	}
	return output(out[start:end], next), nil
}

// appendMatch appends item to *out when the filters match get.
func appendMatch[T any](out *[]T, filters []types.Filter, get attrs, item T) error {
	ok, err := matchFilters(filters, get)
	if err != nil {
		return err
	}
	if ok {
		*out = append(*out, item)
	}
	return nil
}

// valuesOf answers the filters a resource supports from the table of
// their values; any other filter name is invalid for it.
func valuesOf(values map[string][]string) attrs {
	return func(name string) ([]string, bool) {
		v, ok := values[name]
		return v, ok
	}
}

// taggedValuesOf is valuesOf for a resource with tags, which answers the
// tag filters too.
func taggedValuesOf(tags []types.Tag, values map[string][]string) attrs {
	return func(name string) ([]string, bool) {
		if v, ok := values[name]; ok {
			return v, true
		}
		return tagAttrs(tags, name)
	}
}

// listed reports whether a resource is among the IDs (or names) a call
// asks for; asking for none lists all.
func listed[S ~string](asked []S, id S) bool {
	return len(asked) == 0 || slices.Contains(asked, id)
}

// cloneTags copies a tag list (nil stays nil), so a caller cannot change
// the simulator's.
func cloneTags(tags []types.Tag) []types.Tag {
	return append([]types.Tag(nil), tags...)
}
