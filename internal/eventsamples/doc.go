// Package eventsamples checks the sample payloads in the repository's
// events/ directory: that each parses strictly into the type the Lambda
// handlers receive (aws-lambda-go events, Kubernetes admission/v1) and that
// they are consistent with one another. It also hands them to other
// packages' tests as fuzz seeds (Read, InterruptionBodies).
package eventsamples
