//go:build tools

package karpenter

// Karpenter's KWOK provider is the binary EnsureBinary builds; importing
// it here keeps its packages in go.mod and go.sum.
import _ "sigs.k8s.io/karpenter/kwok"
