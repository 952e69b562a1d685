package awssim

import (
	"encoding/json"
	"fmt"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

type ssmParameter struct {
	Name             string
	Type             string
	Value            string
	Version          int
	LastModifiedDate float64
	ARN              string
	DataType         string
}

// handleSSM serves GetParameter(s) for the public EKS AMI parameters the
// simulated region publishes (see ec2sim.Cloud.PublishAMI).
func (s *Server) handleSSM(op string, body []byte) (any, error) {
	var in struct {
		Name  string
		Names []string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, protocol.Errorf("ValidationException", "invalid JSON body: %v", err)
	}
	switch op {
	case "GetParameter":
		p, ok := s.ssmParam(in.Name)
		if !ok {
			return nil, &protocol.APIError{Code: "ParameterNotFound", Message: fmt.Sprintf("Parameter %s not found.", in.Name), Status: 400}
		}
		return map[string]any{"Parameter": p}, nil
	case "GetParameters":
		if len(in.Names) == 0 || len(in.Names) > 10 {
			return nil, protocol.Errorf("ValidationException", "GetParameters takes 1 to 10 names, got %d", len(in.Names))
		}
		params, invalid := []ssmParameter{}, []string{}
		for _, n := range in.Names {
			if p, ok := s.ssmParam(n); ok {
				params = append(params, p)
			} else {
				invalid = append(invalid, n)
			}
		}
		return map[string]any{"Parameters": params, "InvalidParameters": invalid}, nil
	}
	return nil, protocol.Errorf("UnknownOperationException", "SSM operation %s is not simulated", op)
}

func (s *Server) ssmParam(name string) (ssmParameter, bool) {
	v, ok := s.ec2.SSMParameter(name)
	if !ok {
		return ssmParameter{}, false
	}
	return ssmParameter{Name: name, Type: "String", Value: v, Version: 1, DataType: "aws:ec2:image",
		LastModifiedDate: float64(s.opts.Now().Unix()),
		ARN:              fmt.Sprintf("arn:aws:ssm:%s::parameter%s", s.opts.Region, name)}, true
}
