package store

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodewright/nodewright/internal/apis"
)

// TestDecodesReuseOnlyTheSameBody: an item whose body is the one a claim
// was decoded from gets a copy of that claim without decoding it; a caller's
// change to its copy stays its own; the same name and version with another
// body is decoded afresh.
func TestDecodesReuseOnlyTheSameBody(t *testing.T) {
	s := &Store{}
	nc := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"v": "1"}}}
	item := func() map[string]types.AttributeValue {
		av, err := s.claimToItem(nc, 1)
		if err != nil {
			t.Fatal(err)
		}
		return av
	}
	v1 := item()
	_, _, kept, err := s.decodes.decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	s.decodes.last.Store(&map[string]decodedClaim{"a": kept})
	// Marks the kept copy: a claim reused from it shows the mark.
	kept.claim.Labels["kept"] = "yes"

	reused, _, _, err := s.decodes.decode(v1)
	if err != nil || reused.Labels["kept"] != "yes" || reused.ResourceVersion != "1" {
		t.Fatalf("the same body: labels %v version %s (%v); want the kept claim's copy", reused.Labels, reused.ResourceVersion, err)
	}
	reused.Labels["changed-by"] = "caller"
	if again, _, _, _ := s.decodes.decode(v1); again.Labels["changed-by"] != "" {
		t.Error("a caller's change to its copy showed in the next one")
	}

	nc.Labels["v"] = "2"
	fresh, _, _, err := s.decodes.decode(item())
	if err != nil || fresh.Labels["v"] != "2" || fresh.Labels["kept"] != "" {
		t.Errorf("the same name and version with another body: labels %v (%v); want it decoded afresh", fresh.Labels, err)
	}
}
