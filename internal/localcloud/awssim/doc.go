// Package awssim is the project's AWS wire-protocol simulator: one HTTP
// server on 127.0.0.1 that speaks enough of EC2 (query/XML), STS (query),
// SSM, Pricing, SQS and EventBridge (JSON) and EKS (REST JSON) for the
// unmodified aws-sdk-go-v2 clients, pointed at it with AWS_ENDPOINT_URL or
// BaseEndpoint. Requests are routed by X-Amz-Target, the SigV4 credential
// scope's service name, the EKS path and the Action parameter.
//
// Around the wire protocols it provides:
//
//   - a seeded region (ec2sim): a VPC with discovery-tagged private subnets per
//     zone (karpenter.sh/discovery=<cluster>) and untagged public ones,
//     cluster and node security groups, EKS-optimized AMIs (AL2023, AL2,
//     Bottlerocket; x86_64, arm64, nvidia) with their public SSM parameters,
//     and instance types, offerings and prices from internal/catalog;
//   - CreateFleet (instant) with lowest-price / prioritized on-demand and
//     price-capacity-optimized / capacity-optimized / lowest-price spot
//     allocation, per-pool errors (InsufficientInstanceCapacity, Unsupported,
//     InsufficientFreeAddressesInSubnet, SpotMaxPriceTooLow,
//     InvalidLaunchTemplateName.NotFoundException, ...) and ClientToken
//     idempotency; instances go pending -> running -> shutting-down ->
//     terminated after Options.Delays, divided by Options.TimeScale;
//   - capacity reservations (EC2().AddCapacityReservation, ended by their end
//     date or EC2().EndCapacityReservation): DescribeCapacityReservations with
//     filters, targeted and open launches that take and give back slots,
//     ReservationCapacityExceeded when full; an ended ODCR's instances run on
//     outside it, an ended capacity block's are terminated;
//   - placement groups (EC2().AddPlacementGroup): DescribePlacementGroups,
//     launches into a template's group and partition (recorded on the
//     instance), a cluster group held to the zone of its first instance, a
//     spread group to seven instances per zone;
//   - an EKS token webhook (TokenReviewURL) for kube-apiserver;
//   - a kubelet emulation (SetKube) that registers a KWOK-managed Node for
//     every running instance from its user data and instance type;
//   - the cloud's own events on the EventBridge bus (state changes, spot
//     interruption warnings, rebalance recommendations, AWS Health scheduled
//     changes), delivered by rules to SQS queues;
//   - fault injection (InjectFault, Throttle, FailNth, EC2().SetCapacity) and
//     a call log (Calls).
//
// Everything is deterministic for a given Options.Seed except wall-clock
// timestamps. Spot prices are derived (catalog.DerivedSpotPrice), not real.
package awssim
