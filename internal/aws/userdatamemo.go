package aws

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nodewright/nodewright/internal/aws/userdata"
)

// userDataMemoSize bounds the memo: a pass launches a few distinct user
// data (one per NodePool, AMI family and max pods), so a full memo is
// cleared rather than managed.
const userDataMemoSize = 256

// userDataMemo renders each distinct user data once. The claims of a burst
// share their NodePool's options, and rendering nodeadm's YAML (JSON, then
// YAML through sigs.k8s.io/yaml) for each of 272 launches was a third of
// the launch path's own CPU. The options' JSON is the key: every field of
// userdata.Options is exported and encoded, pointers by their values.
type userDataMemo struct {
	mu    sync.Mutex
	texts map[string]string
}

// generate is userdata.Generate(o), rendered once per distinct o.
func (m *userDataMemo) generate(o userdata.Options) (string, error) {
	key, err := json.Marshal(o)
	if err != nil {
		return "", fmt.Errorf("user data options: %w", err)
	}
	m.mu.Lock()
	text, ok := m.texts[string(key)]
	m.mu.Unlock()
	if ok {
		return text, nil
	}
	if text, err = userdata.Generate(o); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.texts == nil || len(m.texts) >= userDataMemoSize {
		m.texts = map[string]string{}
	}
	m.texts[string(key)] = text
	return text, nil
}
