package scaletest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// apiTraffic is what the API server reports having served, from its own
// /metrics: requests (apiserver_request_total) and response bytes
// (apiserver_response_sizes_sum).
type apiTraffic struct {
	Requests, Bytes float64
	// ByResource is the response bytes per verb and resource
	// ("LIST pods"), to see what a pass reads; RequestsByResource the
	// requests.
	ByResource, RequestsByResource map[string]float64
}

func (a apiTraffic) minus(b apiTraffic) apiTraffic {
	return apiTraffic{Requests: a.Requests - b.Requests, Bytes: a.Bytes - b.Bytes,
		ByResource: mapMinus(a.ByResource, b.ByResource), RequestsByResource: mapMinus(a.RequestsByResource, b.RequestsByResource)}
}

// mapMinus is a-b for the keys that grew.
func mapMinus(a, b map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range a {
		if v-b[k] > 0 {
			d[k] = v - b[k]
		}
	}
	return d
}

// readAPITraffic scrapes the API server's metrics endpoint through cs (an
// admin client). The local cloud's own background traffic is left out:
// KWOK's node heartbeats (leases, node and pod status) and every watch,
// which nodewright, holding none, never opens.
func readAPITraffic(ctx context.Context, cs kubernetes.Interface) (apiTraffic, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiTraffic{}, fmt.Errorf("scrape the api server's metrics: %w", err)
	}
	return parseAPITraffic(raw), nil
}

func parseAPITraffic(raw []byte) apiTraffic {
	out := apiTraffic{ByResource: map[string]float64{}, RequestsByResource: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || (name != "apiserver_request_total" && name != "apiserver_response_sizes_sum") {
			continue
		}
		labelText, valueText, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(valueText), 64)
		if err != nil {
			continue
		}
		labels := parseLabels(labelText)
		if background(labels) {
			continue
		}
		if name == "apiserver_request_total" {
			out.Requests += v
			out.RequestsByResource[labels["verb"]+" "+labels["resource"]] += v
			continue
		}
		out.Bytes += v
		out.ByResource[labels["verb"]+" "+labels["resource"]] += v
	}
	return out
}

// background is traffic nodewright never makes: watches, leases, status
// subresources (KWOK keeps nodes and pods alive through them), and
// requests for no resource: discovery (/api, /apis, which the controller
// manager re-reads every 30 s, about 0.7 MiB a minute at 2,000 nodes),
// OpenAPI and health checks. The functions' typed clients discover
// nothing.
func background(labels map[string]string) bool {
	switch labels["verb"] {
	case "WATCH", "WATCHLIST", "CONNECT":
		return true
	}
	return labels["resource"] == "" || labels["resource"] == "leases" || labels["subresource"] == "status"
}

// parseLabels reads a Prometheus label set (k="v",...). Label values of
// these two metrics hold no commas or escaped quotes.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}
