package kube

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// A function that lists every bound pod each minute reads the same pods
// again and again: in a steady cluster few nodes see a pod come, go or
// change state between two passes. A cached snapshot therefore first reads
// the pods as the API server's table (name, status and node of each pod,
// no object: about a tenth of the bytes of the pods themselves), and reads
// whole pods only of the nodes whose table rows changed since this client's
// last snapshot, reusing the others' pods from it. A warm Lambda keeps the
// client, so a steady cluster costs one table read; a cold one lists all.
//
// The table is read before the pods, so a kept node's pods are never older
// than its rows: a change missed between the two reads shows as a changed
// row next time. A pod that changes without its row changing (labels,
// annotations) keeps its earlier copy until its node's rows change: every
// decision that removes capacity re-reads the pods it acts on.

// reuseMaxChanged is the share of nodes above which re-reading the changed
// nodes one by one costs more requests than one paged list of all pods.
const reuseMaxChanged = 0.1

// podReuse is the bound pods of a client's last cached snapshot, with
// each node's table digest.
type podReuse struct {
	mu      sync.Mutex
	digests map[string]string
	pods    map[string][]*corev1.Pod
}

// podTableAccept asks for the server-side table of pods without objects.
const podTableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// nodeDigests reads the bound pods' table and digests each node's rows
// (name and status of its pods).
func (c *Client) nodeDigests(ctx context.Context, l lister) (map[string]string, error) {
	rc, ok := c.cs.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return nil, nil
	}
	rows := map[string][]string{}
	opts := l.with(boundPodSelector)
	opts.Limit = l.page
	for {
		raw, err := rc.Get().Resource("pods").VersionedParams(&opts, scheme.ParameterCodec).
			Param("includeObject", "None").SetHeader("Accept", podTableAccept).Do(ctx).Raw()
		if err != nil {
			return nil, fmt.Errorf("list the bound pods' table: %w", err)
		}
		var t metav1.Table
		if err := json.Unmarshal(raw, &t); err != nil || t.Kind != "Table" {
			// A server without server-side tables answers with the pods
			// themselves: list them whole.
			c.logger.DebugContext(ctx, "no table of pods; listing them whole", "kind", t.Kind, "error", err)
			return nil, nil
		}
		if err := tableRows(&t, rows); err != nil {
			return nil, err
		}
		if t.Continue == "" {
			break
		}
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = t.Continue, "", ""
	}
	out := make(map[string]string, len(rows))
	for node, rs := range rows {
		slices.Sort(rs)
		h := sha256.New()
		for _, r := range rs {
			h.Write([]byte(r))
			h.Write([]byte{0})
		}
		out[node] = string(h.Sum(nil))
	}
	return out, nil
}

// tableRows adds each row's "name status" to its node's rows.
func tableRows(t *metav1.Table, rows map[string][]string) error {
	name, status, node := -1, -1, -1
	for i, col := range t.ColumnDefinitions {
		switch col.Name {
		case "Name":
			name = i
		case "Status":
			status = i
		case "Node":
			node = i
		}
	}
	if name < 0 || status < 0 || node < 0 {
		return fmt.Errorf("the bound pods' table has no Name, Status or Node column")
	}
	for _, r := range t.Rows {
		if len(r.Cells) <= max(name, status, node) {
			return fmt.Errorf("a row of the bound pods' table has %d cells", len(r.Cells))
		}
		n := fmt.Sprint(r.Cells[node])
		rows[n] = append(rows[n], fmt.Sprint(r.Cells[name], " ", r.Cells[status]))
	}
	return nil
}

// listBoundPodsReusing fills s.PodsByNode from the last cached snapshot's
// pods where a node's rows did not change, reading only the changed nodes'
// pods (or all, when many changed or nothing is kept).
func (c *Client) listBoundPodsReusing(ctx context.Context, s *Snapshot, l lister) error {
	digests, err := c.nodeDigests(ctx, l)
	if err != nil || digests == nil {
		if err == nil {
			err = c.listBoundPods(ctx, s, l)
		}
		return err
	}
	c.reuse.mu.Lock()
	prev, prevPods := c.reuse.digests, c.reuse.pods
	c.reuse.mu.Unlock()
	var changed []string
	for node, d := range digests {
		if prev[node] != d {
			changed = append(changed, node)
		}
	}
	if prev == nil || float64(len(changed)) > reuseMaxChanged*float64(len(digests)) {
		err = c.listBoundPods(ctx, s, l)
	} else {
		err = c.refreshNodes(ctx, s, digests, changed, prevPods)
	}
	if err != nil {
		return err
	}
	c.reuse.mu.Lock()
	c.reuse.digests, c.reuse.pods = digests, s.PodsByNode
	c.reuse.mu.Unlock()
	return nil
}

// refreshNodes keeps the unchanged nodes' pods and reads the changed ones'.
func (c *Client) refreshNodes(ctx context.Context, s *Snapshot, digests map[string]string, changed []string, prev map[string][]*corev1.Pod) error {
	s.PodsByNode = make(map[string][]*corev1.Pod, len(digests))
	for node := range digests {
		if ps := prev[node]; len(ps) > 0 {
			s.PodsByNode[node] = ps
		}
	}
	for _, node := range changed {
		pods, err := c.podsOnNode(ctx, node, podPrune, stripPod)
		if err != nil {
			return err
		}
		delete(s.PodsByNode, node)
		if len(pods) > 0 {
			s.PodsByNode[node] = pods
		}
	}
	return nil
}
