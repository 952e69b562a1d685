package metrics

// Metric names. Karpenter's v1 Prometheus name wherever the meaning is the
// same, so an operator's queries and runbooks carry over; a nodewright_
// prefix for what is nodewright's own. Each name is described once, in
// Definitions, from which infra/README.md's reference table is generated.
const (
	NodeClaimsCreated          = "karpenter_nodeclaims_created_total"
	NodeClaimsTerminated       = "karpenter_nodeclaims_terminated_total"
	NodeClaimsDisrupted        = "karpenter_nodeclaims_disrupted_total"
	PodsUnschedulable          = "karpenter_scheduler_unschedulable_pods_count"
	SchedulingDuration         = "karpenter_scheduler_scheduling_duration_seconds"
	DisruptionDecisions        = "karpenter_voluntary_disruption_decisions_total"
	DisruptionEligibleNodes    = "karpenter_voluntary_disruption_eligible_nodes"
	InterruptionMessages       = "karpenter_interruption_received_messages_total"
	InterruptionMessageLatency = "karpenter_interruption_message_queue_duration_seconds"
	EvictionRequests           = "karpenter_pods_eviction_requests_total"
	CloudProviderErrors        = "karpenter_cloudprovider_errors_total"
	NodePoolUsage              = "karpenter_nodepools_usage"
	NodePoolLimit              = "karpenter_nodepools_limit"
	PodStartupDuration         = "karpenter_pods_startup_duration_seconds"

	Nodes                   = "nodewright_nodes"
	PodsPending             = "nodewright_pods_pending"
	PodsNominated           = "nodewright_pods_nominated_total"
	OldestPendingPodSeconds = "nodewright_pods_oldest_pending_seconds"
	ProvisionerBatchSize    = "nodewright_provisioner_batch_size"
	DisruptionActions       = "nodewright_disruption_actions_performed_total"
	ClusterCostPerHour      = "nodewright_cluster_cost_per_hour"
	WebhookNudges           = "nodewright_webhook_nudges_total"
	// GCRefused counts lifecycle passes whose instance garbage collection
	// would have taken more than the bounded share of the fleet and did
	// nothing instead (alarmed: a fresh or foreign table looks like this).
	GCRefused = "nodewright_gc_refused_total"
	// NodeClaimsUndecodable counts NodeClaim records a listing skipped
	// because they could not be decoded (alarmed).
	NodeClaimsUndecodable = "nodewright_nodeclaims_undecodable_total"
	// LifecycleFailures counts what a lifecycle invocation could not do
	// and reported without failing the invocation: a claim's reconcile in
	// a scheduled pass, a work item, a garbage collection step (alarmed).
	LifecycleFailures = "nodewright_lifecycle_failures_total"
	// FunctionRuns is every function's heartbeat: one per successful
	// invocation, by function (alarmed with missing data as breaching).
	FunctionRuns = "nodewright_function_runs_total"
)

// Kind says how a metric is recorded, which decides its unit and what a
// flush writes: a counter's increments are summed, a gauge and a
// distribution keep every value.
type Kind string

// Kinds of metrics, named as Prometheus names them.
const (
	Counter   Kind = "counter"
	Gauge     Kind = "gauge"
	Histogram Kind = "histogram"
)

// Definition describes one metric: the single place its name, unit,
// dimensions and meaning are written down.
type Definition struct {
	Name string
	Kind Kind
	Unit Unit
	// Dimensions are the metric's own, besides the cluster and function
	// every line carries; a metric may be written without some of them
	// (ClusterCostPerHour has a total without nodepool).
	Dimensions []string
	// Karpenter is the Karpenter metric this one corresponds to when the
	// name differs (or empty), for the reference table.
	Karpenter string
	Help      string
}

// Definitions lists every metric nodewright writes, in the order of the
// reference table. It returns a fresh slice each call.
func Definitions() []Definition {
	return []Definition{
		{Name: NodeClaimsCreated, Kind: Counter, Unit: Count, Dimensions: []string{"nodepool", "reason"},
			Help: "NodeClaims created, by reason (provisioning, or a disruption/interruption replacement)."},
		{Name: NodeClaimsTerminated, Kind: Counter, Unit: Count, Dimensions: []string{"nodepool", "reason"},
			Help: "NodeClaims whose instance and node are gone, by the deletion reason."},
		{Name: NodeClaimsDisrupted, Kind: Counter, Unit: Count, Dimensions: []string{"nodepool", "reason"},
			Help: "NodeClaims marked for deletion by disruption, expiry, emptiness, interruption or their NodePool's removal, by reason."},
		{Name: PodsUnschedulable, Kind: Gauge, Unit: None,
			Help: "Pods the last provisioning pass could place on no NodePool."},
		{Name: SchedulingDuration, Kind: Histogram, Unit: Seconds,
			Help: "Time a provisioning pass spent solving (Karpenter's label controller is the function dimension)."},
		{Name: DisruptionDecisions, Kind: Counter, Unit: Count, Dimensions: []string{"method", "decision"},
			Help: "Disruption decisions: delete, replace, invalidated (dropped at validation) or rolled-back; method stands for Karpenter's reason and consolidation_type."},
		{Name: DisruptionEligibleNodes, Kind: Gauge, Unit: None, Dimensions: []string{"method"},
			Help: "Nodes eligible for disruption in the last pass, by method (Karpenter's reason)."},
		{Name: InterruptionMessages, Kind: Counter, Unit: Count, Dimensions: []string{"message_type"},
			Help: "Interruption queue messages received, by type (spot_interrupted, rebalance_recommendation, scheduled_change, state_change, no_op, malformed)."},
		{Name: InterruptionMessageLatency, Kind: Histogram, Unit: Seconds, Dimensions: []string{"message_type"},
			Help: "Delay between EC2's event and its handling."},
		{Name: EvictionRequests, Kind: Counter, Unit: Count, Dimensions: []string{"code"},
			Help: "Pod eviction requests made while draining, by HTTP response code."},
		{Name: CloudProviderErrors, Kind: Counter, Unit: Count, Dimensions: []string{"method"},
			Help: "Errors from EC2 calls, by method (Launch, Terminate)."},
		{Name: NodePoolUsage, Kind: Gauge, Unit: None, Dimensions: []string{"nodepool", "resource_type"},
			Help: "A NodePool's usage: its NodeClaims' capacity summed (cpu in cores, memory in bytes, nodes; other resources when the pool limits them), as nodepool.status.resources."},
		{Name: NodePoolLimit, Kind: Gauge, Unit: None, Dimensions: []string{"nodepool", "resource_type"},
			Help: "A NodePool's spec.limits, one per limited resource (same units as the usage)."},
		{Name: PodStartupDuration, Kind: Histogram, Unit: Seconds,
			Help: "Time from a pod's creation to its Ready condition, for pods that became Ready since the disruption function's previous pass (first start only; restarts are not counted)."},
		{Name: Nodes, Kind: Gauge, Unit: None, Dimensions: []string{"nodepool", "capacity_type"}, Karpenter: "karpenter_cluster_state_node_count",
			Help: "NodeClaims (launched or in flight, deleting included) by NodePool and capacity type."},
		{Name: PodsPending, Kind: Gauge, Unit: None, Karpenter: "karpenter_pods_state{phase=Pending}",
			Help: "Pending pods the provisioner saw in its last pass."},
		{Name: PodsNominated, Kind: Counter, Unit: Count,
			Help: "Pods nominated to a launched NodeClaim (the Nominated event)."},
		{Name: OldestPendingPodSeconds, Kind: Gauge, Unit: None, Karpenter: "max(karpenter_pods_unbound_time_seconds)",
			Help: "Age of the oldest pending pod in the last provisioning pass (alarmed: OldestPendingPod)."},
		{Name: ProvisionerBatchSize, Kind: Histogram, Unit: Count, Karpenter: "karpenter_scheduler_queue_depth",
			Help: "Pods in a provisioning pass's batch."},
		{Name: DisruptionActions, Kind: Counter, Unit: Count, Dimensions: []string{"method", "action", "nodepool"},
			Help: "Nodes acted on by an executed disruption command (one per candidate), by method, action and NodePool."},
		{Name: ClusterCostPerHour, Kind: Gauge, Unit: None, Dimensions: []string{"nodepool"},
			Help: "Cost per hour of the running NodeClaims, in USD: the total without nodepool, and one per NodePool."},
		{Name: WebhookNudges, Kind: Counter, Unit: Count, Dimensions: []string{"reason"},
			Help: "Provisioner nudges the webhook sent, by reason."},
		{Name: GCRefused, Kind: Counter, Unit: Count,
			Help: "Lifecycle passes whose instance garbage collection would have taken more than its bounded share of the fleet and did nothing (alarmed: GarbageCollectionRefused)."},
		{Name: NodeClaimsUndecodable, Kind: Counter, Unit: Count,
			Help: "NodeClaim records a listing skipped because they could not be decoded (alarmed: UndecodableNodeClaims)."},
		{Name: LifecycleFailures, Kind: Counter, Unit: Count, Dimensions: []string{"part"},
			Help: "Lifecycle steps that failed and were reported without failing the invocation, by part (claim, work_item, instance_gc, node_gc); the pass goes on with the other claims (alarmed: LifecycleFailing)."},
		{Name: FunctionRuns, Kind: Counter, Unit: Count,
			Help: "Successful invocations, the functions' heartbeat (alarmed per scheduled function: ProvisionerHeartbeat, LifecycleHeartbeat, DisruptionHeartbeat)."},
	}
}
