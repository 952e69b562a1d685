package aws

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"
)

// IsCapacityError reports whether a CreateFleet error code means "this pool
// has no capacity for us right now" rather than "the request is wrong": the
// pool is marked unavailable and the launch moves on to other offerings.
func IsCapacityError(code string) bool {
	switch code {
	case "InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded",
		"UnfulfillableCapacity", "Unsupported", "InsufficientCapacityOnHost", "SpotMaxPriceTooLow",
		"InsufficientReservedInstanceCapacity", "ReservationCapacityExceeded":
		return true
	}
	return false
}

// ErrInsufficientCapacity is wrapped by Launch when every offering of the
// NodeClaim is unavailable; the provisioner re-plans the claim's pods.
var ErrInsufficientCapacity = errors.New("insufficient capacity")

// ErrLaunchInDoubt is wrapped by Launch when CreateFleet says a launch with
// the claim's ClientToken already happened (IdempotentParameterMismatch) but
// DescribeInstances does not show its instance yet. The caller requeues the
// claim; Launch never launches again for it until the first launch is found
// or known to have produced no instance.
var ErrLaunchInDoubt = errors.New("an earlier launch of this claim may have succeeded and is not visible yet")

// ErrThrottled is wrapped by Launch when an EC2 call of the launch was
// still throttled (RequestLimitExceeded) after the SDK's own retries with
// backoff. A throttled CreateFleet says nothing about capacity and launched
// nothing, so the claim's attempt is not settled: the next Launch sends the
// same ClientToken. The caller keeps the claim, launches no more this pass
// and retries it later.
var ErrThrottled = errors.New("EC2 request rate limit exceeded")

// isThrottleCode reports the codes EC2 (and the other APIs of the launch
// path) answer a throttled call with.
func isThrottleCode(code string) bool {
	switch code {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled", "EC2ThrottledException":
		return true
	}
	return false
}

// markThrottled wraps ErrThrottled into err when its AWS error is a
// throttle, so callers need not know the codes.
func markThrottled(err error) error {
	if err == nil || errors.Is(err, ErrThrottled) || !isThrottleCode(apiErrorCode(err)) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrThrottled, err)
}

// ErrNotOwned is wrapped by Terminate for instances nodewright did not launch
// for this cluster.
var ErrNotOwned = errors.New("instance not launched by nodewright for cluster")

// ErrInstanceNotVisible is wrapped by Terminate for ids DescribeInstances
// does not know: gone long ago, or launched too recently to be seen yet
// (see Terminate and InvisibleLongEnough).
var ErrInstanceNotVisible = errors.New("instance not visible to DescribeInstances")

// ErrNodeClassNotReady is wrapped when an EC2NodeClass resolves to no subnets,
// security groups or AMIs: launching cannot succeed until it is fixed.
var ErrNodeClassNotReady = errors.New("EC2NodeClass not ready")

// apiErrorCode returns the AWS error code of err ("" when it has none).
func apiErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isNotFound reports AWS "does not exist" errors of the resources this package reads.
func isNotFound(err error) bool {
	switch apiErrorCode(err) {
	case "InvalidInstanceID.NotFound", "InvalidLaunchTemplateName.NotFoundException",
		"InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateId.Malformed", "ParameterNotFound",
		"ResourceNotFoundException":
		return true
	}
	return false
}

// LaunchError describes a failed CreateFleet for one NodeClaim.
type LaunchError struct {
	NodeClaim string
	// Errors are the per-override fleet errors of the last attempt ("code: message").
	Errors []string
	Err    error
}

func (e *LaunchError) Error() string {
	return fmt.Sprintf("launch nodeclaim %s: %v %v", e.NodeClaim, e.Err, e.Errors)
}

func (e *LaunchError) Unwrap() error { return e.Err }
