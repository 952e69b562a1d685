package apis

import (
	"errors"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader. Properties: no panic; a
// failure is a non-empty ErrorList whose entries name the file; a success
// yields objects that pass validation on their own and can be hashed.
// The committed corpus (testdata/fuzz/FuzzLoad) holds the seed examples and
// edge cases. Run with a minimization cap; minimizing multi-kilobyte YAML
// inputs otherwise stalls the fuzzer:
//
//	go test -run '^$' -fuzz '^FuzzLoad$' -fuzztime 60s -fuzzminimizetime 5s ./internal/apis
func FuzzLoad(f *testing.F) {
	f.Add([]byte(pool + "---\n" + class))
	f.Add([]byte(sprintf(betaPool, "a", 5) + "---\n" + betaClass))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nspec: {limits: {cpu: &x [1, 2]}, weight: *x}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := LoadData("fuzz.yaml", data)
		if cfg == nil {
			t.Fatal("nil Config")
		}
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is not a non-empty ErrorList: %T %v", err, err)
			}
			for _, e := range list {
				if e.File != "fuzz.yaml" || e.Line < 0 || e.Message == "" {
					t.Fatalf("bad FieldError %+v", e)
				}
			}
			return
		}
		for _, np := range cfg.NodePools {
			if verr := np.Validate(); verr != nil {
				t.Fatalf("loaded NodePool fails Validate: %v", verr)
			}
			_ = np.Hash()
			if cfg.NodeClassFor(np) == nil {
				t.Fatalf("NodePool %s loaded with unresolved nodeClassRef", np.Name)
			}
		}
		for _, nc := range cfg.NodeClasses {
			if verr := nc.Validate(); verr != nil {
				t.Fatalf("loaded EC2NodeClass fails Validate: %v", verr)
			}
			_ = nc.Hash()
		}
	})
}
