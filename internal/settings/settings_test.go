package settings

import (
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnvDefaults(t *testing.T) {
	s, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Rebalance != "ignore" || s.BatchIdle != time.Second || s.BatchMax != 10*time.Second {
		t.Fatalf("defaults: %+v", s)
	}
	if err := s.Require(EnvClusterName); err == nil {
		t.Fatal("missing cluster name not reported")
	}
}

func TestFromEnvParses(t *testing.T) {
	s, err := FromEnv(env(map[string]string{EnvClusterName: "c", EnvRebalance: "replace", EnvBatchIdle: "2s", EnvBatchMax: "20", EnvLogLevel: "debug",
		EnvOwner: "arn:aws:dynamodb:us-east-1:1:table/t", EnvGCMaxShare: "0.2", EnvGCMaxInstances: "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Rebalance != "replace" || s.BatchIdle != 2*time.Second || s.BatchMax != 20*time.Second || s.LogLevel.String() != "DEBUG" ||
		s.Owner != "arn:aws:dynamodb:us-east-1:1:table/t" || s.GCMaxShare != 0.2 || s.GCMaxInstances != 3 {
		t.Fatalf("%+v", s)
	}
	if err := s.Require(EnvClusterName, EnvOwner); err != nil {
		t.Fatal(err)
	}
}

func TestFromEnvRejects(t *testing.T) {
	for _, m := range []map[string]string{
		{EnvRebalance: "sometimes"},
		{EnvBatchIdle: "soon"},
		{EnvBatchIdle: "5s", EnvBatchMax: "1s"},
		{EnvLogLevel: "loud"},
		{EnvGCMaxShare: "1.5"},
		{EnvGCMaxShare: "0"},
		{EnvGCMaxInstances: "-1"},
		{EnvFeatureGates: "SpotToSpotConsolidation"},
		{EnvFeatureGates: "SpotToSpotConsolidation=maybe"},
		{EnvFeatureGates: "NodeOverlay=true"},
		{EnvMode: "dry-run"},
	} {
		if _, err := FromEnv(env(m)); err == nil {
			t.Errorf("%v accepted", m)
		}
	}
}

func TestFeatureGates(t *testing.T) {
	s, err := FromEnv(env(nil))
	if err != nil || s.FeatureGates.SpotToSpotConsolidation {
		t.Fatalf("spot-to-spot consolidation must be off by default, as in Karpenter: %+v %v", s.FeatureGates, err)
	}
	s, err = FromEnv(env(map[string]string{EnvFeatureGates: " SpotToSpotConsolidation = true ,NodeRepair=true"}))
	if err != nil || !s.FeatureGates.SpotToSpotConsolidation || !s.FeatureGates.NodeRepair {
		t.Fatalf("gate not read: %+v %v", s.FeatureGates, err)
	}
	if g, err := ParseFeatureGates(s.FeatureGates.String()); err != nil || g != s.FeatureGates {
		t.Fatalf("String does not round-trip: %+v %v", g, err)
	}
}

func TestMode(t *testing.T) {
	for v, shadow := range map[string]bool{"": false, ModeNormal: false, ModeShadow: true} {
		s, err := FromEnv(env(map[string]string{EnvMode: v}))
		if err != nil || s.Shadow() != shadow {
			t.Errorf("%s=%q: shadow %v, %v", EnvMode, v, s.Shadow(), err)
		}
	}
}
