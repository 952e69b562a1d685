package infra

import (
	"strings"
	"testing"
)

// Every function has a default size (settings.DefaultSize) Lambda accepts.
func TestEveryFunctionHasADefaultSize(t *testing.T) {
	for _, fn := range Functions {
		s := Sizing[fn]
		if s.MemoryMB < minMemoryMB || s.MemoryMB > maxMemoryMB || s.TimeoutSeconds < 1 || s.TimeoutSeconds > maxTimeoutSeconds {
			t.Errorf("%s: default size %d MB, %d s", fn, s.MemoryMB, s.TimeoutSeconds)
		}
	}
}

// Bigger clusters size functions by context; a size Lambda would refuse, or
// one for a function that does not exist, fails validation.
func TestFunctionSizesFromContext(t *testing.T) {
	ctx := map[string]interface{}{CtxClusterName: "prod", CtxConfigDir: "cfg", CtxFunctionSizes: "provisioner=3008:600, disruption=4096:300"}
	c, err := FromContext(func(k string) interface{} { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if s := c.Sized("provisioner"); s.MemoryMB != 3008 || s.TimeoutSeconds != 600 || s.SQSMaxConcurrency != Sizing["provisioner"].SQSMaxConcurrency {
		t.Errorf("provisioner sized %+v", s)
	}
	if s := c.Sized("lifecycle"); s != Sizing["lifecycle"] {
		t.Errorf("lifecycle sized %+v, want the default", s)
	}

	ctx[CtxFunctionSizes] = map[string]interface{}{"provisioner": "64:60", "lifecycle": "1024:901", "scheduler": "512:60", "disruption": "lots"}
	c, err = FromContext(func(k string) interface{} { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, want := range []string{"memory 64 MB", "timeout 901 s", `"scheduler" is not one of`, `"lots" is not MB:seconds`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation %v, want it to say %s", err, want)
		}
	}
}
