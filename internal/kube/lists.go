package kube

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// pager fetches one page of a list: its items, each stripped once, and
// the token that continues the list ("" after the last page).
type pager[T any] func(context.Context, metav1.ListOptions) ([]*T, string, error)

// listAll pages through one list. An expired continue token (410 Gone,
// the API server compacted past the list's resource version) restarts the
// list, at most twice.
func listAll[T any](ctx context.Context, what string, page int64, base metav1.ListOptions, fetch pager[T]) ([]*T, error) {
	for attempt := 0; ; attempt++ {
		out, err := listPages(ctx, page, base, fetch)
		if err != nil && apierrors.IsResourceExpired(err) && attempt < 2 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		return out, nil
	}
}

func listPages[T any](ctx context.Context, page int64, base metav1.ListOptions, fetch pager[T]) ([]*T, error) {
	var out []*T
	opts := base
	opts.Limit = page
	for {
		items, cont, err := fetch(ctx, opts)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = items
		} else {
			out = append(out, items...)
		}
		if cont == "" {
			return out, nil
		}
		// The continue token carries the list's resource version: the
		// API server refuses both at once, so a list begun from the watch
		// cache (resourceVersion=0) continues at the version its first
		// page was served at.
		opts.Continue = cont
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
}

// typedPager pages with a typed client's List. Items are pointers into
// the page's own array (no copies).
func typedPager[L any, T any](list func(context.Context, metav1.ListOptions) (L, error), items func(L) []T, strip func(*T)) pager[T] {
	return func(ctx context.Context, opts metav1.ListOptions) ([]*T, string, error) {
		l, err := list(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		its, cont := pageOf(l, items, strip)
		return its, cont, nil
	}
}

// pageOf is a decoded page's items, stripped, and its continue token.
func pageOf[L any, T any](l L, items func(L) []T, strip func(*T)) ([]*T, string) {
	its := items(l)
	out := make([]*T, len(its))
	for i := range its {
		if strip != nil {
			strip(&its[i])
		}
		out[i] = &its[i]
	}
	cont := ""
	if lm, ok := any(l).(metav1.ListInterface); ok {
		cont = lm.GetContinue()
	}
	return out, cont
}

// streamPager pages through cluster-wide lists of one resource whose list
// kind is kind, decoding a protobuf response as it arrives
// (decodeListStream) and any other the usual way. client-go's typed List
// reads a whole response into a buffer grown by doubling, then decodes
// all of it: for the 40,000 pods the watch cache sends at once, hundreds
// of MB. Clientsets without a REST client (client-go's fake) use typed.
func streamPager[L runtime.Object, T any, P protoItem[T]](rc rest.Interface, resource, kind string, newList func() L, items func(L) []T,
	typed func(context.Context, metav1.ListOptions) (L, error), prune *pruneRule, strip func(*T)) pager[T] {
	if r, ok := rc.(*rest.RESTClient); rc == nil || (ok && r == nil) {
		return typedPager(typed, items, strip)
	}
	decoder := scheme.Codecs.UniversalDeserializer()
	return func(ctx context.Context, opts metav1.ListOptions) ([]*T, string, error) {
		body, err := rc.Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Stream(ctx)
		if err != nil {
			return nil, "", err
		}
		defer body.Close()
		r, err := uncompressed(body)
		if err != nil {
			return nil, "", fmt.Errorf("read %s page: %w", resource, err)
		}
		its, cont, ok, err := decodeListStream[T, P](r, kind, prune, strip)
		if err != nil {
			return nil, "", fmt.Errorf("decode %s page: %w", resource, err)
		}
		if ok {
			return its, cont, nil
		}
		buf, err := io.ReadAll(r)
		if err != nil {
			return nil, "", fmt.Errorf("read %s page: %w", resource, err)
		}
		l := newList()
		if _, _, err := decoder.Decode(buf, nil, l); err != nil {
			return nil, "", fmt.Errorf("decode %s page: %w", resource, err)
		}
		its, cont = pageOf(l, items, strip)
		return its, cont, nil
	}
}

// uncompressed reads body, gunzipping it when it is gzip: client-go's
// transport asks for gzip and gunzips what it asked for, but a response
// compressed without its asking would reach here compressed.
func uncompressed(body io.Reader) (*bufio.Reader, error) {
	const size = 64 << 10
	r := bufio.NewReaderSize(body, size)
	if magic, _ := r.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		return bufio.NewReaderSize(zr, size), nil
	}
	return r, nil
}

func podItems(l *corev1.PodList) []corev1.Pod    { return l.Items }
func nodeItems(l *corev1.NodeList) []corev1.Node { return l.Items }

// podPager lists pods, each stripped (strip, when not nil) as it is read;
// prune, when not nil, must drop nothing strip keeps (podPrune: stripPod).
func (c *Client) podPager(prune *pruneRule, strip func(*corev1.Pod)) pager[corev1.Pod] {
	return streamPager[*corev1.PodList, corev1.Pod](c.cs.CoreV1().RESTClient(), "pods", "PodList",
		func() *corev1.PodList { return &corev1.PodList{} }, podItems, c.cs.CoreV1().Pods("").List, prune, strip)
}

func (c *Client) nodePager() pager[corev1.Node] {
	return streamPager[*corev1.NodeList, corev1.Node](c.cs.CoreV1().RESTClient(), "nodes", "NodeList",
		func() *corev1.NodeList { return &corev1.NodeList{} }, nodeItems, c.cs.CoreV1().Nodes().List, nodePrune, stripNode)
}
