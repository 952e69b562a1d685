package ec2sim

import (
	"path"
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
		for _, h := range have {
			if ok, _ := path.Match(escapeMatch(p), h); ok {
				return true
			}
		}
	}
	return false
}

// escapeMatch keeps EC2's wildcards (* and ?) and escapes path.Match's others.
func escapeMatch(p string) string {
	r := strings.NewReplacer(`[`, `\[`, `]`, `\]`, `\`, `\\`)
	return r.Replace(p)
}

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

// pageOf is the page of items that nextToken and maxResults (lo..hi)
// select, with the token of the next page.
func pageOf[T any](items []T, maxResults *int32, nextToken *string, lo, hi int32) ([]T, *string, error) {
	start, end, next, err := page(len(items), maxResults, nextToken, lo, hi)
	if err != nil {
		return nil, nil, err
	}
	return items[start:end], next, nil
}

// cloneTags copies a tag list (nil stays nil), so a caller cannot change
// the simulator's.
func cloneTags(tags []types.Tag) []types.Tag {
	return append([]types.Tag(nil), tags...)
}
