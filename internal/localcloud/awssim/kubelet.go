package awssim

import (
	"fmt"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/kubelet"
)

// SetKube enables the kubelet emulation: from now on every instance that
// reaches running registers a Node (after Delays.NodeRegistration) in the
// API server cfg points at, and Nodes of instances that go away stop
// heartbeating (KWOK annotation removed, lease deleted) and are deleted once
// terminated. Instances already running register now.
func (s *Server) SetKube(cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("awssim: kube client: %w", err)
	}
	s.setKubeClient(cs)
	return nil
}

func (s *Server) setKubeClient(c kubernetes.Interface) {
	cat := s.ec2.Config().Catalog
	k := kubelet.New(kubelet.Config{
		Client: c, Region: s.opts.Region, KubernetesVersion: s.opts.KubernetesVersion,
		TypeInfo: func(n string) (ec2types.InstanceTypeInfo, bool) {
			info, ok := cat.Types[n]
			return info, ok
		},
		Image: s.ec2.Image,
		After: s.after, RegistrationDelay: s.opts.Delays.NodeRegistration, Logger: s.logger,
		KeepTerminatedNodes: s.opts.KeepTerminatedNodes, PodENI: s.opts.PodENI,
	})
	s.mu.Lock()
	s.kubelet = k
	s.mu.Unlock()
	for _, inst := range s.ec2.Instances() {
		if inst.State.Name == ec2types.InstanceStateNameRunning {
			k.Observe(inst, inst.State.Name, s.ec2.UserData(*inst.InstanceId))
		}
	}
}

// KubeletEvents lists what the kubelet emulation did (registered,
// stopped-heartbeat, deleted, failed with the error).
func (s *Server) KubeletEvents() []kubelet.Event {
	s.mu.Lock()
	k := s.kubelet
	s.mu.Unlock()
	if k == nil {
		return nil
	}
	return k.Events()
}

func (s *Server) observeKubelet(t ec2sim.Transition) {
	s.mu.Lock()
	k := s.kubelet
	s.mu.Unlock()
	if k != nil {
		k.Observe(t.Instance, t.To, t.UserData)
	}
}
