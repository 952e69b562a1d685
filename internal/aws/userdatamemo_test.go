package aws

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/aws/userdata"
)

func memoOptions() userdata.Options {
	maxPods := int32(58)
	return userdata.Options{
		Family: userdata.AL2023, ClusterName: "demo", ClusterEndpoint: "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com",
		CABundle: "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=", ServiceCIDR: "10.100.0.0/16",
		Kubelet: userdata.Kubelet{MaxPods: &maxPods},
		Labels:  map[string]string{"karpenter.sh/nodepool": "default"},
		Taints:  []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}},
	}
}

// TestUserDataRenderedOncePerOptions: the same options render once (a
// second launch gets the first's text), other options (a max pods changed
// behind the same pointer, another label) render afresh and as
// userdata.Generate does, and the memo stays bounded.
func TestUserDataRenderedOncePerOptions(t *testing.T) {
	var m userDataMemo
	o := memoOptions()
	first, err := m.generate(o)
	if want, _ := userdata.Generate(o); err != nil || first != want {
		t.Fatalf("first render differs from userdata.Generate (%v)", err)
	}
	for k := range m.texts {
		m.texts[k] = "kept"
	}
	if again, _ := m.generate(memoOptions()); again != "kept" {
		t.Error("the same options were rendered again")
	}

	*o.Kubelet.MaxPods = 110
	other := memoOptions()
	other.Labels = map[string]string{"karpenter.sh/nodepool": "other"}
	for _, oo := range []userdata.Options{o, other} {
		got, err := m.generate(oo)
		if want, _ := userdata.Generate(oo); err != nil || got != want {
			t.Errorf("other options: got the memo's %q (%v), want them rendered", got[:min(len(got), 20)], err)
		}
	}

	for i := range 2 * userDataMemoSize {
		oo := memoOptions()
		oo.Labels = map[string]string{"n": fmt.Sprint(i)}
		if _, err := m.generate(oo); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(m.texts); n > userDataMemoSize {
		t.Errorf("the memo holds %d texts, more than %d", n, userDataMemoSize)
	}
}

// TestUserDataOptionsAllKeyed: the memo's key is the options' JSON, so
// every field of the options (and of their kubelet part) must be encoded:
// a field JSON leaves out would let two launches that differ in it share
// one user data.
func TestUserDataOptionsAllKeyed(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[userdata.Options](), reflect.TypeFor[userdata.Kubelet]()} {
		for f := range typ.Fields() {
			if !f.IsExported() || strings.HasPrefix(f.Tag.Get("json"), "-") {
				t.Errorf("%s.%s is not in the options' JSON, the user data memo's key", typ.Name(), f.Name)
			}
		}
	}
}
