package localcloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/internal/proc"
)

// State describes a local cloud kept running by `nodewright local up`, so
// `local env` and `local down` in other shells can find it.
type State struct {
	PID         int       `json:"pid"` // the process that owns the cloud
	StartedAt   time.Time `json:"startedAt"`
	Region      string    `json:"region"`
	ClusterName string    `json:"clusterName"`
	Kubeconfig  string    `json:"kubeconfig,omitempty"`
	Env         []string  `json:"env"`
	ChildPIDs   []int     `json:"childPIDs"`
	// BinDir holds the kubectl built with the control plane, for PATH.
	BinDir string `json:"binDir,omitempty"`
	// Control is the URL of the fault buttons' endpoint of a `local up
	// --config` (empty when nodewright does not run).
	Control string `json:"control,omitempty"`
}

// Extras are what a `local up` running nodewright adds to its State.
type Extras struct {
	// Env is added to the cloud's (the table's name for `get`, kubectl's
	// directory on PATH).
	Env     []string
	Control string
}

// ErrNotRunning means no `local up` is running.
var ErrNotRunning = errors.New("no local cloud is running (start one with `nodewright local up`)")

// StatePath is where the running local cloud's State is recorded:
// $NODEWRIGHT_LOCAL_STATE, else local/state.json in the cache directory.
func StatePath() (string, error) {
	if p := os.Getenv("NODEWRIGHT_LOCAL_STATE"); p != "" {
		return p, nil
	}
	dir, err := proc.CacheDir("local")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "state.json"), nil
}

// SaveState records c as owned by this process. It refuses when another
// live process already owns a local cloud.
func SaveState(c *Cloud, x Extras) (string, error) {
	path, err := StatePath()
	if err != nil {
		return "", err
	}
	if old, err := LoadState(); err == nil && old.PID != os.Getpid() {
		return "", fmt.Errorf("a local cloud is already running (pid %d); stop it with `nodewright local down`", old.PID)
	}
	st := State{
		PID: os.Getpid(), StartedAt: time.Now().UTC(), Region: c.Region, ClusterName: c.ClusterName,
		Kubeconfig: c.Kubeconfig, Env: append(c.Env(), x.Env...), ChildPIDs: c.PIDs(), Control: x.Control,
	}
	if c.Plane != nil && c.Plane.Kubectl != "" {
		st.BinDir = filepath.Dir(c.Plane.Kubectl)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("save local cloud state: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return "", fmt.Errorf("save local cloud state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("save local cloud state: %w", err)
	}
	return path, nil
}

// LoadState reads the running local cloud's State. A state file whose owner
// has died is stale: it is removed and ErrNotRunning returned.
func LoadState() (*State, error) {
	path, err := StatePath()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, fmt.Errorf("read local cloud state: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read local cloud state %s: %w", path, err)
	}
	if st.PID <= 0 || !processAlive(st.PID) {
		_ = os.Remove(path)
		return nil, ErrNotRunning
	}
	return &st, nil
}

// RemoveState deletes the state file if this process owns it.
func RemoveState() {
	path, err := StatePath()
	if err != nil {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var st State
	if json.Unmarshal(b, &st) == nil && st.PID == os.Getpid() {
		_ = os.Remove(path)
	}
}

// Stop asks the owner of st to shut its local cloud down (SIGTERM) and waits
// up to timeout for it to exit, killing it after that. Its children die with
// it (they are started with a parent-death signal), so they are only checked.
func (st *State) Stop(timeout time.Duration) error {
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop local cloud (pid %d): %w", st.PID, err)
	}
	deadline := time.Now().Add(timeout)
	for processAlive(st.PID) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if processAlive(st.PID) {
		_ = syscall.Kill(st.PID, syscall.SIGKILL)
		time.Sleep(500 * time.Millisecond)
	}
	if path, err := StatePath(); err == nil {
		_ = os.Remove(path)
	}
	if left := alive(st.ChildPIDs); len(left) > 0 {
		return fmt.Errorf("stop local cloud: processes %v still exist", left)
	}
	return nil
}

func processAlive(pid int) bool { return proc.Alive(pid) }
