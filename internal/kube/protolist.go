package kube

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The watch cache answers a list in one response whatever its page limit
// (40,000 pods: 128 MB of protobuf). Read into a buffer, then decoded,
// the response and its decoded pods were most of a disruption pass's
// heap. A list is therefore decoded as it arrives: the protobuf
// envelope's fields, then, inside its raw object (the list), the list's
// metadata and its items one by one, each length-delimited, each decoded
// and stripped before the next is read. Only one item's bytes are held
// at a time.

// protobufMagic starts every protobuf response of the API server; a
// runtime.Unknown follows, whose Raw field (2) holds the list.
var protobufMagic = []byte("k8s\x00")

// maxItemBytes bounds one list item: etcd holds objects of at most 1.5 MiB
// by default; a larger length is a garbled response, not a pod.
const maxItemBytes = 64 << 20

// protoItem is a list item type with generated protobuf decoding.
type protoItem[T any] interface {
	*T
	Unmarshal([]byte) error
}

// decodeListStream decodes a protobuf list response of kind (PodList) from
// r, pruning each item's bytes by prune (when not nil: prune.go) and
// calling strip (when not nil) on each item as soon as it is decoded,
// and returns the items and the list's continue token. ok is false, and
// nothing of r consumed, when r does not start with a protobuf envelope:
// the caller then decodes it the usual way.
func decodeListStream[T any, P protoItem[T]](r *bufio.Reader, kind string, prune *pruneRule, strip func(*T)) (items []*T, cont string, ok bool, err error) {
	if magic, _ := r.Peek(len(protobufMagic)); !bytes.Equal(magic, protobufMagic) {
		return nil, "", false, nil
	}
	_, _ = r.Discard(len(protobufMagic))
	d := &listDecoder[T, P]{protoReader: protoReader{r: r, left: -1}, prune: prune, strip: strip}
	if err := d.envelope(kind); err != nil {
		return nil, "", true, fmt.Errorf("protobuf %s: %w", kind, err)
	}
	return d.items, d.meta.Continue, true, nil
}

// listDecoder decodes one list response.
type listDecoder[T any, P protoItem[T]] struct {
	protoReader
	prune  *pruneRule
	pruner pruner
	strip  func(*T)
	meta   metav1.ListMeta
	items  []*T
	// chunk is where the next items are decoded: items are allocated a
	// chunk at a time rather than in one array grown by copying.
	chunk []T
}

// envelope reads the runtime.Unknown around the list: its type (which must
// be kind, as client-go's decoder requires a kind), its raw object (the
// API server always sends one: a cut response may not) and its content
// encoding (which must be empty: client-go would not decode one).
func (d *listDecoder[T, P]) envelope(kind string) error {
	var tm runtime.TypeMeta
	seen := false
	for {
		num, typ, err := d.tag()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			b, err := d.bytes()
			if err == nil {
				err = tm.Unmarshal(b)
			}
			if err != nil {
				return fmt.Errorf("type: %w", err)
			}
		case num == 2 && typ == protowire.BytesType:
			if err := d.list(); err != nil {
				return err
			}
			seen = true
		case num == 3 && typ == protowire.BytesType:
			b, err := d.bytes()
			if err != nil {
				return err
			}
			if len(b) > 0 {
				return fmt.Errorf("content encoding %q not supported", b)
			}
		default:
			if err := d.skip(typ); err != nil {
				return err
			}
		}
	}
	if tm.Kind != kind || tm.APIVersion != "v1" {
		return fmt.Errorf("the response holds %q %q", tm.APIVersion, tm.Kind)
	}
	if !seen {
		return errors.New("the response holds no list")
	}
	return nil
}

// list reads the raw object: a list's metadata (1) and items (2).
func (d *listDecoder[T, P]) list() error {
	n, err := d.length()
	if err != nil {
		return err
	}
	d.left = n
	defer func() { d.left = -1 }()
	for d.left > 0 {
		num, typ, err := d.tag()
		if err != nil {
			return unexpectedEOF(err)
		}
		if num != 1 && num != 2 {
			if err := d.skip(typ); err != nil {
				return err
			}
			continue
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("field %d of wire type %d", num, typ)
		}
		b, err := d.bytes()
		if err != nil {
			return err
		}
		if num == 1 {
			err = d.meta.Unmarshal(b)
		} else {
			err = d.item(b)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// item decodes and strips one item. Decoded objects copy what they keep,
// so b's buffer is free for the next item.
func (d *listDecoder[T, P]) item(b []byte) error {
	if d.prune != nil {
		var err error
		if b, err = d.pruner.prune(b, d.prune, 0); err != nil {
			return fmt.Errorf("item %d: %w", len(d.items), err)
		}
	}
	if len(d.chunk) == 0 {
		d.chunk = make([]T, min(max(len(d.items), 16), 512))
	}
	it := &d.chunk[0]
	d.chunk = d.chunk[1:]
	if err := P(it).Unmarshal(b); err != nil {
		return fmt.Errorf("item %d: %w", len(d.items), err)
	}
	if d.strip != nil {
		d.strip(it)
	}
	d.items = append(d.items, it)
	return nil
}

// protoReader reads protobuf fields from a stream.
type protoReader struct {
	r *bufio.Reader
	// left is how many bytes are left of the message being read; -1 when
	// it runs to the end of the stream (the envelope).
	left int64
	buf  []byte // the last length-delimited value, reused
}

// tag reads a field's tag; io.EOF at the stream's end.
func (p *protoReader) tag() (protowire.Number, protowire.Type, error) {
	v, err := p.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
		return 0, 0, fmt.Errorf("invalid field number %d", num)
	}
	return num, typ, nil
}

// varint reads a varint; io.EOF when the stream ends before it.
func (p *protoReader) varint() (uint64, error) {
	var x uint64
	for i := range binary64 {
		if p.left == 0 {
			return 0, errors.New("a field overruns its message")
		}
		b, err := p.r.ReadByte()
		if err != nil {
			if i > 0 {
				err = unexpectedEOF(err)
			}
			return 0, err
		}
		p.consumed(1)
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, errors.New("a varint overflows 64 bits")
}

// binary64 is the most bytes a 64-bit varint takes.
const binary64 = 10

// length reads a length prefix, which must fit in the message.
func (p *protoReader) length() (int64, error) {
	v, err := p.varint()
	if err != nil {
		return 0, unexpectedEOF(err)
	}
	if v > 1<<62 || (p.left >= 0 && int64(v) > p.left) {
		return 0, fmt.Errorf("a field of %d bytes overruns its message", v)
	}
	return int64(v), nil
}

// bytes reads a length-delimited value (at most maxItemBytes) into the
// reused buffer.
func (p *protoReader) bytes() ([]byte, error) {
	n, err := p.length()
	if err != nil {
		return nil, err
	}
	if n > maxItemBytes {
		return nil, fmt.Errorf("a field of %d bytes: too large", n)
	}
	if int64(cap(p.buf)) < n {
		p.buf = make([]byte, n)
	}
	b := p.buf[:n]
	if _, err := io.ReadFull(p.r, b); err != nil {
		return nil, unexpectedEOF(err)
	}
	p.consumed(n)
	return b, nil
}

// skip reads past a field's value.
func (p *protoReader) skip(typ protowire.Type) error {
	var n int64
	switch typ {
	case protowire.VarintType:
		_, err := p.varint()
		return unexpectedEOF(err)
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		var err error
		if n, err = p.length(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("wire type %d not supported", typ)
	}
	if p.left >= 0 && n > p.left {
		return errors.New("a field overruns its message")
	}
	if _, err := p.r.Discard(int(n)); err != nil {
		return unexpectedEOF(err)
	}
	p.consumed(n)
	return nil
}

func (p *protoReader) consumed(n int64) {
	if p.left > 0 {
		p.left -= n
	}
}

// unexpectedEOF is err, an end of stream inside a field being unexpected.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
