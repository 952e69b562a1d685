package scaletest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"
)

// profilePass writes a CPU profile of what follows until the returned func
// is called, the allocation profiles before and after (diff them with
// pprof -diff_base), a heap profile every half second in between and the
// functions' log lines, into NODEWRIGHT_SCALE_PROFILE's directory when set:
// the pass's own profile, without the seeding around it. The heap profiles
// tell the function's live heap from the in-process simulator's (each is
// the heap as of the latest collection; see SCALE.md).
func profilePass(b *testing.B, c *Cluster, name string) func() {
	dir := os.Getenv("NODEWRIGHT_SCALE_PROFILE")
	if dir == "" {
		return func() {}
	}
	write := func(file string, fn func(f *os.File) error) {
		f, err := os.Create(filepath.Join(dir, file))
		if err == nil {
			err = errors.Join(fn(f), f.Close())
		}
		if err != nil {
			b.Fatalf("profile %s: %v", file, err)
		}
	}
	allocs := func(f *os.File) error { return pprof.Lookup("allocs").WriteTo(f, 0) }
	write(name+".allocs0.pb.gz", allocs)
	logged := c.Env.Logs.Len()
	cpu, err := os.Create(filepath.Join(dir, name+".cpu.pb.gz"))
	if err == nil {
		err = pprof.StartCPUProfile(cpu)
	}
	if err != nil {
		b.Fatalf("cpu profile: %v", err)
	}
	heaps := sampleHeap(dir, name)
	server := apiServerProfile(c, filepath.Join(dir, name+".apiserver-cpu.pb.gz"))
	return func() {
		if err := server(); err != nil {
			b.Logf("API server profile: %v", err)
		}
		if err := heaps(); err != nil {
			b.Fatalf("heap profiles: %v", err)
		}
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			b.Fatalf("cpu profile: %v", err)
		}
		write(name+".allocs1.pb.gz", allocs)
		write(name+".log", func(f *os.File) error {
			_, err := f.Write(c.Env.Logs.Bytes()[logged:])
			return err
		})
	}
}

// sampleHeap writes name.heapNN.pb.gz into dir every half second until the
// returned func is called, which returns the first error.
func sampleHeap(dir, name string) func() error {
	done, out := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				out <- nil
				return
			case <-tick.C:
			}
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s.heap%02d.pb.gz", name, i)))
			if err == nil {
				err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
			}
			if err != nil {
				<-done
				out <- err
				return
			}
		}
	}()
	return func() error {
		close(done)
		return <-out
	}
}

// apiServerProfile writes the local API server's CPU profile of the next
// NODEWRIGHT_SCALE_SERVER_PROFILE seconds (none when unset) into file;
// the returned func waits for it.
func apiServerProfile(c *Cluster, file string) func() error {
	secs := os.Getenv("NODEWRIGHT_SCALE_SERVER_PROFILE")
	if secs == "" {
		return func() error { return nil }
	}
	out := make(chan error, 1)
	go func() {
		raw, err := c.admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", secs).Timeout(time.Minute).DoRaw(c.ctx)
		if err == nil {
			err = os.WriteFile(file, raw, 0o600)
		}
		out <- err
	}()
	return func() error { return <-out }
}
