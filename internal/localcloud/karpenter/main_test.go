package karpenter_test

import (
	"os"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/karpenter"
)

// shared is one local cloud with Karpenter's user and audit group; spot
// reclaims come 20 s after their warning.
var shared = cloudtest.NewShared("coexist", cloudtest.SpotInterruption(20*time.Second),
	func(o *localcloud.Options) { *o = karpenter.CloudOptions(*o) })

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
