package apis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// classTags is the class (first in its file) with spec.tags at line 21 and
// n tags k0..k(n-1) from line 22, plus extra lines after them.
func classTags(n int, extra ...string) string {
	var b strings.Builder
	b.WriteString("  tags:\n")
	for i := range n {
		fmt.Fprintf(&b, "    k%d: v\n", i)
	}
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	return edit(class, "  kubelet:", b.String()+"  kubelet:") + "---\n" + pool
}

// TestEC2LimitsValidation: spec.tags and spec.userData are refused, with
// file and line, when what nodewright builds from them cannot fit EC2's
// limits (50 tags a resource counting nodewright's own LaunchTags, 128 and
// 256 characters, the aws: prefix, 16 KB of user data).
func TestEC2LimitsValidation(t *testing.T) {
	userData := func(n int) string {
		return edit(class, "  kubelet:", "  userData: \""+strings.Repeat("#", n)+"\"\n  kubelet:") + "---\n" + pool
	}
	const at = MaxTagsPerResource - LaunchTags // 42
	cases := []struct {
		name string
		doc  string
		want []string // nil: loads
	}{
		{"tags that leave room for nodewright's", classTags(at), nil},
		{"one tag too many", classTags(at + 1),
			[]string{`nodepools/default.yaml:21: spec.tags: 43 tags, and nodewright adds 8 of its own to each instance and volume: EC2 allows at most 50 per resource, so at most 42 here`}},
		{"Name is one of nodewright's", classTags(at, "    Name: my-node"), nil},
		{"Name does not make room for two", classTags(at+1, "    Name: my-node"),
			[]string{`nodepools/default.yaml:21: spec.tags: 44 tags, and nodewright adds 7 of its own to each instance and volume: EC2 allows at most 50 per resource, so at most 43 here`}},
		{"aws: prefix", classTags(1, "    aws:cost-center: x"),
			[]string{`nodepools/default.yaml:23: spec.tags[aws:cost-center]: tag keys starting with 'aws:' are reserved for AWS`}},
		{"AWS: prefix", classTags(0, "    AWS:Team: x"),
			[]string{`nodepools/default.yaml:22: spec.tags[AWS:Team]: tag keys starting with 'aws:' are reserved for AWS`}},
		{"key of 128 characters", classTags(0, "    "+strings.Repeat("k", 128)+": v"), nil},
		{"key of 129 characters", classTags(0, "    "+strings.Repeat("k", 129)+": v"),
			[]string{`nodepools/default.yaml:22: spec.tags[` + strings.Repeat("k", 129) + `]: tag key is longer than 128 characters, EC2's limit`}},
		{"value of 256 characters", classTags(0, "    big: "+strings.Repeat("v", 256)), nil},
		{"value of 257 characters", classTags(1, "    big: "+strings.Repeat("v", 257)),
			[]string{`nodepools/default.yaml:23: spec.tags[big]: tag value is longer than 256 characters, EC2's limit`}},
		{"user data of 16 KB", userData(MaxUserDataBytes), nil},
		{"user data over 16 KB", userData(MaxUserDataBytes + 1),
			[]string{`nodepools/default.yaml:21: spec.userData: 16385 bytes: EC2 limits user data to 16384 bytes (before base64), and nodewright adds its bootstrap to it`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadData(testFile, []byte(tc.doc))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("want ErrorList, got %v", err)
			}
			got := make([]string, len(list))
			for i, e := range list {
				got[i] = e.Error()
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestLaunchTagCount(t *testing.T) {
	if got := LaunchTagCount(nil); got != LaunchTags {
		t.Errorf("no spec.tags: %d", got)
	}
	if got := LaunchTagCount(map[string]string{"a": "b", LaunchTagName: "n"}); got != LaunchTags+1 {
		t.Errorf("spec.tags with Name: %d", got)
	}
}
