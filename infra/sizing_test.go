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

// An account whose Lambda concurrency quota cannot hold the defaults'
// reserved 16 above the 100 Lambda keeps unreserved deploys with less (or
// none): the template reserves what the context says, and the event
// sources follow; a value Lambda would refuse fails validation.
func TestReservedConcurrencyFromContext(t *testing.T) {
	ctx := map[string]interface{}{CtxClusterName: "prod", CtxConfigDir: "cfg", CtxReservedConcurrency: "webhook=0, interruption=2"}
	c, err := FromContext(func(k string) interface{} { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Sized("webhook").ReservedConcurrency != 0 || c.Sized("interruption").ReservedConcurrency != 2 || c.Sized("disruption").ReservedConcurrency != 1 {
		t.Errorf("reserved: webhook %d, interruption %d, disruption %d; want 0, 2, 1",
			c.Sized("webhook").ReservedConcurrency, c.Sized("interruption").ReservedConcurrency, c.Sized("disruption").ReservedConcurrency)
	}
	if n := sqsMaxConcurrency(c.Sized("interruption")); n != 2 {
		t.Errorf("interruption event source cap %d, want its reserved 2", n)
	}
	ctx[CtxReservedConcurrency] = "webhook=-1,interruption=many,scheduler=1,disruption=1001"
	c, err = FromContext(func(k string) interface{} { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, want := range []string{"webhook: -1 is outside", `interruption: "many" is not a number`, `"scheduler" is not one of`, "disruption: 1001 is outside"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation %v, want it to say %s", err, want)
		}
	}
}
