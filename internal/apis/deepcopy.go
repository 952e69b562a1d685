package apis

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Hand-written deep copies (the project does not run deepcopy-gen): callers
// such as controllers mutate copies of shared, loaded configuration.

// DeepCopy returns an independent copy.
func (np *NodePool) DeepCopy() *NodePool {
	if np == nil {
		return nil
	}
	out := &NodePool{TypeMeta: np.TypeMeta}
	np.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	s := np.Spec
	out.Spec = NodePoolSpec{
		Template: NodeClaimTemplate{
			ObjectMeta: TemplateObjectMeta{
				Labels:      maps.Clone(s.Template.ObjectMeta.Labels),
				Annotations: maps.Clone(s.Template.ObjectMeta.Annotations),
			},
			Spec: NodeClaimTemplateSpec{
				Requirements:           copyRequirements(s.Template.Spec.Requirements),
				Taints:                 copyTaints(s.Template.Spec.Taints),
				StartupTaints:          copyTaints(s.Template.Spec.StartupTaints),
				NodeClassRef:           clonePtr(s.Template.Spec.NodeClassRef),
				ExpireAfter:            s.Template.Spec.ExpireAfter.deepCopy(),
				TerminationGracePeriod: clonePtr(s.Template.Spec.TerminationGracePeriod),
			},
		},
		Disruption: Disruption{
			ConsolidateAfter:    s.Disruption.ConsolidateAfter.deepCopy(),
			ConsolidationPolicy: s.Disruption.ConsolidationPolicy,
		},
		Limits:   Limits(corev1.ResourceList(s.Limits).DeepCopy()),
		Weight:   clonePtr(s.Weight),
		Replicas: clonePtr(s.Replicas),
	}
	if s.Disruption.Budgets != nil {
		out.Spec.Disruption.Budgets = make([]Budget, len(s.Disruption.Budgets))
		for i, b := range s.Disruption.Budgets {
			out.Spec.Disruption.Budgets[i] = Budget{
				Reasons:  slices.Clone(b.Reasons),
				Nodes:    b.Nodes,
				Schedule: clonePtr(b.Schedule),
				Duration: clonePtr(b.Duration),
			}
		}
	}
	return out
}

// DeepCopy returns an independent copy.
func (nc *EC2NodeClass) DeepCopy() *EC2NodeClass {
	if nc == nil {
		return nil
	}
	out := &EC2NodeClass{TypeMeta: nc.TypeMeta}
	nc.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	s := nc.Spec
	out.Spec = EC2NodeClassSpec{
		AssociatePublicIPAddress: clonePtr(s.AssociatePublicIPAddress),
		AMIFamily:                clonePtr(s.AMIFamily),
		UserData:                 clonePtr(s.UserData),
		Role:                     s.Role,
		InstanceProfile:          clonePtr(s.InstanceProfile),
		Tags:                     maps.Clone(s.Tags),
		Kubelet:                  s.Kubelet.DeepCopy(),
		InstanceStorePolicy:      clonePtr(s.InstanceStorePolicy),
		DetailedMonitoring:       clonePtr(s.DetailedMonitoring),
		Context:                  clonePtr(s.Context),
		IPPrefixCount:            clonePtr(s.IPPrefixCount),
		ConnectionTracking:       copyConnectionTracking(s.ConnectionTracking),
		CPUOptions:               copyCPUOptions(s.CPUOptions),
		PlacementGroupSelector:   copyPlacementGroup(s.PlacementGroupSelector),
		NetworkInterfaces:        copyNetworkInterfaces(s.NetworkInterfaces),
	}
	if s.CapacityReservationSelectorTerms != nil {
		out.Spec.CapacityReservationSelectorTerms = make([]CapacityReservationSelectorTerm, len(s.CapacityReservationSelectorTerms))
		for i, t := range s.CapacityReservationSelectorTerms {
			t.Tags = maps.Clone(t.Tags)
			out.Spec.CapacityReservationSelectorTerms[i] = t
		}
	}
	if s.SubnetSelectorTerms != nil {
		out.Spec.SubnetSelectorTerms = make([]SubnetSelectorTerm, len(s.SubnetSelectorTerms))
		for i, t := range s.SubnetSelectorTerms {
			out.Spec.SubnetSelectorTerms[i] = SubnetSelectorTerm{Tags: maps.Clone(t.Tags), ID: t.ID}
		}
	}
	if s.SecurityGroupSelectorTerms != nil {
		out.Spec.SecurityGroupSelectorTerms = make([]SecurityGroupSelectorTerm, len(s.SecurityGroupSelectorTerms))
		for i, t := range s.SecurityGroupSelectorTerms {
			out.Spec.SecurityGroupSelectorTerms[i] = SecurityGroupSelectorTerm{Tags: maps.Clone(t.Tags), ID: t.ID, Name: t.Name}
		}
	}
	if s.AMISelectorTerms != nil {
		out.Spec.AMISelectorTerms = make([]AMISelectorTerm, len(s.AMISelectorTerms))
		for i, t := range s.AMISelectorTerms {
			t.Tags = maps.Clone(t.Tags)
			out.Spec.AMISelectorTerms[i] = t
		}
	}
	out.Spec.BlockDeviceMappings = copyBlockDevices(s.BlockDeviceMappings)
	if m := s.MetadataOptions; m != nil {
		out.Spec.MetadataOptions = &MetadataOptions{
			HTTPEndpoint:            clonePtr(m.HTTPEndpoint),
			HTTPProtocolIPv6:        clonePtr(m.HTTPProtocolIPv6),
			HTTPPutResponseHopLimit: clonePtr(m.HTTPPutResponseHopLimit),
			HTTPTokens:              clonePtr(m.HTTPTokens),
		}
	}
	return out
}

func copyBlockDevices(bdms []*BlockDeviceMapping) []*BlockDeviceMapping {
	if bdms == nil {
		return nil
	}
	out := make([]*BlockDeviceMapping, len(bdms))
	for i, m := range bdms {
		if m == nil {
			continue
		}
		cp := &BlockDeviceMapping{DeviceName: clonePtr(m.DeviceName), RootVolume: m.RootVolume}
		if e := m.EBS; e != nil {
			cp.EBS = &BlockDevice{
				DeleteOnTermination:      clonePtr(e.DeleteOnTermination),
				Encrypted:                clonePtr(e.Encrypted),
				IOPS:                     clonePtr(e.IOPS),
				KMSKeyID:                 clonePtr(e.KMSKeyID),
				SnapshotID:               clonePtr(e.SnapshotID),
				Throughput:               clonePtr(e.Throughput),
				VolumeType:               clonePtr(e.VolumeType),
				VolumeInitializationRate: clonePtr(e.VolumeInitializationRate),
			}
			if e.VolumeSize != nil {
				q := e.VolumeSize.DeepCopy()
				cp.EBS.VolumeSize = &q
			}
		}
		out[i] = cp
	}
	return out
}

func copyConnectionTracking(c *ConnectionTracking) *ConnectionTracking {
	if c == nil {
		return nil
	}
	return &ConnectionTracking{
		TCPEstablishedTimeout: clonePtr(c.TCPEstablishedTimeout),
		UDPStreamTimeout:      clonePtr(c.UDPStreamTimeout),
		UDPTimeout:            clonePtr(c.UDPTimeout),
	}
}

func copyCPUOptions(c *CPUOptions) *CPUOptions {
	if c == nil {
		return nil
	}
	return &CPUOptions{NestedVirtualization: clonePtr(c.NestedVirtualization)}
}

func copyPlacementGroup(p *PlacementGroupSelector) *PlacementGroupSelector {
	if p == nil {
		return nil
	}
	return &PlacementGroupSelector{Name: clonePtr(p.Name), ID: clonePtr(p.ID)}
}

func copyNetworkInterfaces(nis []*NetworkInterface) []*NetworkInterface {
	if nis == nil {
		return nil
	}
	out := make([]*NetworkInterface, len(nis))
	for i, ni := range nis {
		if ni != nil {
			out[i] = &NetworkInterface{NetworkCardIndex: clonePtr(ni.NetworkCardIndex), DeviceIndex: clonePtr(ni.DeviceIndex), InterfaceType: ni.InterfaceType}
		}
	}
	return out
}

// DeepCopy returns an independent copy.
func (nc *NodeClaim) DeepCopy() *NodeClaim {
	if nc == nil {
		return nil
	}
	out := &NodeClaim{TypeMeta: nc.TypeMeta, NodePoolHash: nc.NodePoolHash, NodeClassHash: nc.NodeClassHash}
	nc.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	s := nc.Spec
	out.Spec = NodeClaimSpec{
		Requirements:           copyRequirements(s.Requirements),
		Taints:                 copyTaints(s.Taints),
		StartupTaints:          copyTaints(s.StartupTaints),
		Resources:              ResourceRequirements{Requests: s.Resources.Requests.DeepCopy()},
		NodeClassRef:           clonePtr(s.NodeClassRef),
		ExpireAfter:            s.ExpireAfter.deepCopy(),
		TerminationGracePeriod: clonePtr(s.TerminationGracePeriod),
	}
	st := nc.Status
	out.Status = NodeClaimStatus{
		ProviderID:  st.ProviderID,
		InstanceID:  st.InstanceID,
		NodeName:    st.NodeName,
		ImageID:     st.ImageID,
		Capacity:    st.Capacity.DeepCopy(),
		Allocatable: st.Allocatable.DeepCopy(),
	}
	st.LastPodEventTime.DeepCopyInto(&out.Status.LastPodEventTime)
	if st.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(st.Conditions))
		for i := range st.Conditions {
			st.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
	return out
}

func (n NillableDuration) deepCopy() NillableDuration {
	return NillableDuration{Duration: clonePtr(n.Duration), Never: n.Never}
}

func copyRequirements(rs []NodeSelectorRequirementWithMinValues) []NodeSelectorRequirementWithMinValues {
	if rs == nil {
		return nil
	}
	out := make([]NodeSelectorRequirementWithMinValues, len(rs))
	for i, r := range rs {
		out[i] = NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: slices.Clone(r.Values), MinValues: clonePtr(r.MinValues)}
	}
	return out
}

func copyTaints(ts []corev1.Taint) []corev1.Taint {
	if ts == nil {
		return nil
	}
	out := make([]corev1.Taint, len(ts))
	for i := range ts {
		ts[i].DeepCopyInto(&out[i])
	}
	return out
}
