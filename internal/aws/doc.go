// Package aws is nodewright's EC2 launch path: it discovers the subnets,
// security groups, AMIs and cluster facts an EC2NodeClass selects, renders
// user data (package userdata), keeps one launch template per distinct launch
// configuration, launches NodeClaims with CreateFleet (instant, one instance)
// while honouring and filling the shared unavailable-offerings (ICE) set,
// terminates only this cluster's instances, and keeps instance types and
// prices fresh from the EC2 and Pricing APIs.
//
// Every AWS call goes through the unmodified aws-sdk-go-v2 clients, so the
// standard endpoint overrides (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_EC2, ...)
// point the package at the local simulator.
//
// # Instance profile convention
//
// An EC2NodeClass names either spec.instanceProfile (used as is) or
// spec.role. For a role, nodewright does not create instance profiles at run
// time (the functions hold no IAM write permissions); the CDK app creates one
// per role named by InstanceProfileName(cluster, role):
// "nodewright-<cluster>-<role name>", where <role name> is the part of the
// role (or role ARN) after the last "/". Names longer than IAM's 128-character
// limit keep the first 119 characters and append "-" and 8 hex characters of
// the SHA-256 of the full name.
//
// # One instance per NodeClaim
//
// Launch never launches twice for one NodeClaim, even when a CreateFleet
// response is lost and EC2's eventually consistent DescribeInstances does not
// show the instance yet. The rules:
//
//   - Launch first looks for a pending or running instance tagged
//     karpenter.sh/nodeclaim=<claim> and adopts it.
//   - Attempt n of a claim always sends ClientToken(cluster, claim, n). A lost
//     response retried with the same parameters gets the original fleet back
//     (its instance, or its capacity errors).
//   - Launch moves on to token n+1 only after a CreateFleet response for token
//     n arrived and showed no instance (capacity errors, a stale template or
//     an exhausted subnet).
//   - A failed Launch says which attempt is the first not known to be
//     settled (NextAttempt: the attempt whose call failed, throttled or
//     lost). The caller records it on the claim
//     (nodewright.io/next-launch-attempt) and passes it back as
//     LaunchRequest.FirstAttempt, so a retry whose parameters changed meanwhile
//     (the ICE set, spot left out) does not resend the tokens already
//     answered with other parameters. A crash before the record is written
//     leaves a lower value: the retry then meets IdempotentParameterMismatch
//     and takes the rule below, never a second instance.
//   - IdempotentParameterMismatch means token n was used by an earlier run
//     with other parameters (the ICE set or the options changed since): a
//     launch with it happened. Launch then looks for the claim's instance by
//     tag, with backoff, for up to Options.LaunchConfirmWait (30 s) and adopts
//     it; if none shows up it fails with ErrLaunchInDoubt and the caller
//     requeues the claim. It never takes a new token in that case. The
//     provisioner then gives the claim up and re-plans its pods onto a new
//     claim (new name, new tokens); should the doubted instance appear after
//     all, it has no live claim and the lifecycle's GC terminates it.
//
// # Capacity reservations
//
// CapacityReservations resolves an EC2NodeClass's
// capacityReservationSelectorTerms to its active reservations, read anew
// every pass (their room changes with every launch); WithReservations
// hands them to the catalog, which offers each as a reserved offering of
// its type and zone (catalog.ForNodeClass). A claim that allows reserved
// capacity launches into a reservation first, as Karpenter's does: one
// launch template per reservation targets it (preference
// capacity-reservations-only: into the reservation or not at all; the
// market type of a capacity block or an interruptible reservation), the
// fleet names only those templates (on-demand; capacity-block for one
// capacity block, the cheapest, since a fleet takes one; reserved-capacity
// for interruptible reservations) and, of several reservations of one type
// and zone, the one with the most room. A full reservation
// (ReservationCapacityExceeded) marks (type, zone, reserved) in the ICE
// set; the claim then falls back to spot or on-demand when its
// requirements allow. Every other launch sets the reservation preference
// "none", so EC2 never puts it into an open reservation the plan did not
// choose (Karpenter's shape with its ReservedCapacity feature, on by
// default). DescribeInstances reports an instance in a reservation as
// capacity type reserved (Instance.Reservation).
//
// # Placement groups
//
// PlacementGroup resolves spec.placementGroupSelector (name or id, state
// available); a selector that matches nothing leaves the class not ready.
// Every launch template of the class names the group (and, for a
// partition group whose claim allows only some partitions, the lowest of
// them; otherwise EC2 picks and Launch reads the partition back). A
// cluster group's launches only offer the zone its live instances run in.
// Claims record karpenter.k8s.aws/placement-group-id and
// karpenter.k8s.aws/placement-group-partition, which registration copies
// onto the Node.
//
// # Tags
//
// Instances, volumes and fleets carry kubernetes.io/cluster/<cluster>=owned,
// eks:eks-cluster-name=<cluster>, nodewright.io/managed-by=nodewright
// (TagManagedBy), nodewright.io/owner, karpenter.sh/nodepool,
// karpenter.sh/nodeclaim, nodewright.io/ec2nodeclass (TagInstanceNodeClass),
// Name=<nodeclaim> and the EC2NodeClass's spec.tags (which cannot override
// these): CreateFleet tags them (an instant fleet can tag only these three
// types). Network interfaces and, for spot launches, spot instance requests
// get the same tags but the claim's own (PoolTags) from the launch
// template's data, as Karpenter's do; so templates are per NodePool, and
// spot launches have templates of their own (EC2 fails an on-demand launch
// from a template that tags spot requests). Launch templates carry the
// EC2NodeClass's spec.tags, karpenter.sh/nodepool, the cluster tag,
// TagManagedBy, nodewright.io/owner, karpenter.k8s.aws/cluster=<cluster>
// and karpenter.k8s.aws/ec2nodeclass, but not eks:eks-cluster-name, by
// which Karpenter's launch template cache finds the templates it deletes.
//
// The request shapes are Karpenter-AWS v1.14's, checked field by field on
// every example EC2NodeClass by internal/aws/karpenterawsdiff, whose
// DIFFERENCES.md lists what nodewright sends differently and why.
//
// Karpenter tags its instances and templates with the same cluster and
// karpenter.* tags, so TagManagedBy is what ownership means here:
// ListClusterInstances (garbage collection), the crash-recovery lookup in
// Launch, LaunchTemplates (template GC) and Terminate all require it.
// Terminate refuses any instance without both the cluster tag and
// TagManagedBy, so nodewright never terminates an instance it did not launch.
// The other way round, instances do not carry karpenter.k8s.aws/ec2nodeclass,
// one of the three tags Karpenter's instance garbage collector lists by, so a
// Karpenter still running during a migration does not terminate nodewright's
// instances as NodeClaim-less leaks.
package aws
