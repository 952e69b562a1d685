package kube

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
)

// protobufMagic starts every protobuf response of the API server; a
// runtime.Unknown follows, whose Raw field holds the object.
var protobufMagic = []byte("k8s\x00")

// unknownRaw returns the Raw bytes of a protobuf response's envelope in
// place: client-go's decoder copies them into a runtime.Unknown first, a
// second copy of the whole list (90 MB for 40,000 pods). ok is false when
// buf is not a protobuf envelope with a raw, unencoded object.
func unknownRaw(buf []byte) (raw []byte, ok bool) {
	if !bytes.HasPrefix(buf, protobufMagic) {
		return nil, false
	}
	for b := buf[len(protobufMagic):]; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		if num == 3 || num == 2 { // contentEncoding, raw
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || typ != protowire.BytesType {
				return nil, false
			}
			if num == 3 && len(v) > 0 {
				return nil, false // an encoded object: leave it to client-go
			}
			if num == 2 {
				raw, ok = v, true
			}
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil, false
		}
		b = b[n:]
	}
	return raw, ok
}

// decodePodList decodes a protobuf PodList response into l one pod at a
// time, calling strip on each as soon as it is decoded: what strip drops
// (environment, probes, managed fields) is garbage before the next pod is
// read, instead of all 40,000 pods' worth at once. ok is false when buf is
// not a protobuf response; the caller then decodes it the usual way.
func decodePodList(buf []byte, l *corev1.PodList, strip func(*corev1.Pod)) (ok bool, err error) {
	raw, ok := unknownRaw(buf)
	if !ok {
		return false, nil
	}
	items := 0
	if err := eachField(raw, func(num protowire.Number, _ []byte) error {
		if num == 2 {
			items++
		}
		return nil
	}); err != nil {
		return true, err
	}
	l.Items = make([]corev1.Pod, 0, items)
	return true, eachField(raw, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			return l.ListMeta.Unmarshal(v)
		case 2:
			l.Items = append(l.Items, corev1.Pod{})
			p := &l.Items[len(l.Items)-1]
			if err := p.Unmarshal(v); err != nil {
				return err
			}
			if strip != nil {
				strip(p)
			}
		}
		return nil
	})
}

// eachField calls f with every length-delimited field of a protobuf
// message (a list's metadata and items are; others are skipped).
func eachField(msg []byte, f func(protowire.Number, []byte) error) error {
	for b := msg; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("protobuf list: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("protobuf list: %w", protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("protobuf list: %w", protowire.ParseError(n))
		}
		if err := f(num, v); err != nil {
			return fmt.Errorf("protobuf list: %w", err)
		}
		b = b[n:]
	}
	return nil
}
