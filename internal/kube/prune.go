package kube

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
)

// A list item's bytes are pruned of the fields strip drops before they are
// decoded, so those fields (a pod's managed fields, environment, probes,
// container statuses) are never decoded into garbage. strip still runs on
// the decoded item: pruning only spares the work. Field numbers are those
// of k8s.io/api's generated.proto (and apimachinery's for ObjectMeta); the
// stream decoder's tests check the result against client-go's decoding
// then strip.

// pruneRule is what to prune of one message.
type pruneRule struct {
	drop map[protowire.Number]bool
	// keep, when set, drops every field not in it.
	keep   map[protowire.Number]bool
	nested map[protowire.Number]*pruneRule
	// dropKey drops the entries of a map field whose key (entry field 1)
	// is the given one.
	dropKey map[protowire.Number]string
}

func numbers(ns ...protowire.Number) map[protowire.Number]bool {
	m := make(map[protowire.Number]bool, len(ns))
	for _, n := range ns {
		m[n] = true
	}
	return m
}

// objectMetaPrune is stripObjectMeta's: managedFields (17) and the
// last-applied annotation (annotations, 12).
var objectMetaPrune = &pruneRule{drop: numbers(17), dropKey: map[protowire.Number]string{12: corev1.LastAppliedConfigAnnotation}}

// containerPrune is stripContainers': command 3, args 4, workingDir 5,
// env 7, livenessProbe 10, readinessProbe 11, lifecycle 12,
// terminationMessagePath 13, envFrom 19, startupProbe 22.
var containerPrune = &pruneRule{drop: numbers(3, 4, 5, 7, 10, 11, 12, 13, 19, 22)}

// volumePrune is stripVolumes': of a volume (name 1, volumeSource 2), the
// source's persistentVolumeClaim 10 and ephemeral 29 only.
var volumePrune = &pruneRule{nested: map[protowire.Number]*pruneRule{2: {keep: numbers(10, 29)}}}

// podPrune is stripPod's: metadata 1; spec 2 (volumes 1, containers 2,
// initContainers 20, ephemeralContainers 34); status 3 (containerStatuses
// 8, initContainerStatuses 10, ephemeralContainerStatuses 13).
var podPrune = &pruneRule{nested: map[protowire.Number]*pruneRule{
	1: objectMetaPrune,
	2: {drop: numbers(34), nested: map[protowire.Number]*pruneRule{1: volumePrune, 2: containerPrune, 20: containerPrune}},
	3: {drop: numbers(8, 10, 13)},
}}

// nodePrune is stripNode's: metadata 1; status 3 (images 8).
var nodePrune = &pruneRule{nested: map[protowire.Number]*pruneRule{1: objectMetaPrune, 3: {drop: numbers(8)}}}

// pruner prunes messages into buffers it reuses, one per depth.
type pruner struct {
	bufs [4][]byte
}

var errGarbled = errors.New("a garbled field")

// prune returns msg without what r drops, in a buffer reused by the next
// call at this depth.
func (p *pruner) prune(msg []byte, r *pruneRule, depth int) ([]byte, error) {
	out := p.bufs[depth][:0]
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, errGarbled
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return nil, errGarbled
		}
		field := msg[:n+m]
		msg = msg[n+m:]
		if r.drop[num] || (r.keep != nil && !r.keep[num]) {
			continue
		}
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(field[n:])
			if key, ok := r.dropKey[num]; ok && entryKeyIs(v, key) {
				continue
			}
			if sub := r.nested[num]; sub != nil && depth+1 < len(p.bufs) {
				pruned, err := p.prune(v, sub, depth+1)
				if err != nil {
					return nil, err
				}
				out = protowire.AppendTag(out, num, typ)
				out = protowire.AppendBytes(out, pruned)
				continue
			}
		}
		out = append(out, field...)
	}
	p.bufs[depth] = out
	return out, nil
}

// entryKeyIs reports whether a map entry's key (field 1) is key.
func entryKeyIs(entry []byte, key string) bool {
	for len(entry) > 0 {
		num, typ, n := protowire.ConsumeTag(entry)
		if n < 0 {
			return false
		}
		if num == 1 && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(entry[n:])
			return string(v) == key
		}
		m := protowire.ConsumeFieldValue(num, typ, entry[n:])
		if m < 0 {
			return false
		}
		entry = entry[n+m:]
	}
	return false
}
