package basedeps

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDefaultsFillOnlyWhatIsMissing(t *testing.T) {
	if Logger(nil) == nil || Clock(nil) == nil || Recorder(nil) == nil || Sleeper(nil) == nil {
		t.Fatal("a nil dependency must get a default")
	}
	fixed := time.Unix(42, 0)
	if got := Clock(func() time.Time { return fixed })(); !got.Equal(fixed) {
		t.Fatalf("Clock replaced the given clock: %v", got)
	}
	called := false
	_ = Sleeper(func(context.Context, time.Duration) error { called = true; return nil })(context.Background(), time.Hour)
	if !called {
		t.Fatal("Sleeper replaced the given sleep")
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on an ended context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep(1ms) = %v", err)
	}
}

func TestDefaultKeepsPositiveSettings(t *testing.T) {
	d, n, f := time.Duration(0), -1, 0.25
	Default(&d, time.Minute)
	Default(&n, 3)
	Default(&f, 0.5)
	if d != time.Minute || n != 3 || f != 0.25 {
		t.Fatalf("Default: got %v %d %v, want 1m0s 3 0.25", d, n, f)
	}
}

func TestWrapBuildsThenWraps(t *testing.T) {
	double := func(n int) (int, error) { return 2 * n, nil }
	got, err := Wrap(21, double, func(n int) *int { return &n })
	if err != nil || got == nil || *got != 42 {
		t.Fatalf("Wrap(21) = %v, %v; want 42", got, err)
	}
	refuse := func(int) (int, error) { return 0, errors.New("refused") }
	got, err = Wrap(1, refuse, func(n int) *int { return &n })
	if err == nil || got != nil {
		t.Fatalf("Wrap over a failing constructor = %v, %v; want nil and its error", got, err)
	}
}
