package awssim

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Version stages Secrets Manager moves on every new value: the new one
// becomes AWSCURRENT and the old current AWSPREVIOUS, which is what lets a
// reader accept both during a rotation.
const (
	stageCurrent  = "AWSCURRENT"
	stagePrevious = "AWSPREVIOUS"
)

// secretStore holds Secrets Manager secrets: the current and the previous
// string value of each, by name and by ARN.
type secretStore struct {
	mu      sync.Mutex
	byID    map[string]*secret // name and ARN
	version int
}

type secret struct {
	name, arn         string
	current, previous secretVersion
}

type secretVersion struct {
	id, value string
}

// handleSecretsManager serves CreateSecret, PutSecretValue and
// GetSecretValue (by stage), enough for the webhook's shared secret and its
// rotation.
func (s *Server) handleSecretsManager(op string, body []byte) (any, error) {
	var in struct {
		Name, SecretId, SecretString, VersionStage string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, protocol.Errorf("ValidationException", "invalid JSON body: %v", err)
	}
	st := &s.secrets
	st.mu.Lock()
	defer st.mu.Unlock()
	switch op {
	case "CreateSecret":
		return st.create(s.opts.Region, s.opts.AccountID, in.Name, in.SecretString)
	case "PutSecretValue":
		return st.put(in.SecretId, in.SecretString)
	case "GetSecretValue":
		return st.get(in.SecretId, in.VersionStage)
	}
	return nil, protocol.Errorf("UnknownOperationException", "Secrets Manager operation %s is not simulated", op)
}

func (st *secretStore) create(region, account, name, value string) (any, error) {
	if name == "" || value == "" {
		return nil, protocol.Errorf("InvalidParameterException", "CreateSecret needs Name and SecretString")
	}
	if st.byID == nil {
		st.byID = map[string]*secret{}
	}
	if _, ok := st.byID[name]; ok {
		return nil, protocol.Errorf("ResourceExistsException", "The operation failed because the secret %s already exists.", name)
	}
	sec := &secret{name: name, arn: fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-AbCdEf", region, account, name)}
	sec.current = st.newVersion(value)
	st.byID[name], st.byID[sec.arn] = sec, sec
	return map[string]any{"ARN": sec.arn, "Name": name, "VersionId": sec.current.id}, nil
}

func (st *secretStore) put(id, value string) (any, error) {
	sec, ok := st.byID[id]
	if !ok {
		return nil, secretNotFound()
	}
	if value == "" {
		return nil, protocol.Errorf("InvalidParameterException", "PutSecretValue needs SecretString")
	}
	sec.previous, sec.current = sec.current, st.newVersion(value)
	return map[string]any{"ARN": sec.arn, "Name": sec.name, "VersionId": sec.current.id, "VersionStages": []string{stageCurrent}}, nil
}

func (st *secretStore) get(id, stage string) (any, error) {
	sec, ok := st.byID[id]
	if !ok {
		return nil, secretNotFound()
	}
	v := sec.current
	switch stage {
	case "", stageCurrent:
	case stagePrevious:
		v = sec.previous
	default:
		v = secretVersion{}
	}
	if v.id == "" {
		return nil, &protocol.APIError{Code: "ResourceNotFoundException", Status: 400,
			Message: fmt.Sprintf("Secrets Manager can't find the specified secret value for staging label: %s", stage)}
	}
	if stage == "" {
		stage = stageCurrent
	}
	return map[string]any{"ARN": sec.arn, "Name": sec.name, "SecretString": v.value, "VersionId": v.id, "VersionStages": []string{stage}}, nil
}

func (st *secretStore) newVersion(value string) secretVersion {
	st.version++
	return secretVersion{id: fmt.Sprintf("00000000-0000-4000-8000-%012d", st.version), value: value}
}

func secretNotFound() error {
	return &protocol.APIError{Code: "ResourceNotFoundException", Status: 400, Message: "Secrets Manager can't find the specified secret."}
}
