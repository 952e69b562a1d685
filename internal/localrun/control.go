package localrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

// Fault is one press of a fault button of `nodewright local`: what the
// simulator already offers its tests (spot reclaims, rebalance
// recommendations, capacity per pool, spot prices), for people.
type Fault struct {
	// Action is "spot-interrupt", "rebalance", "ice" or "price".
	Action string `json:"action"`
	// Node is a node name or an instance ID (spot-interrupt, rebalance).
	Node string `json:"node,omitempty"`
	// Type and Zone name the capacity pool (ice, price).
	Type string `json:"type,omitempty"`
	Zone string `json:"zone,omitempty"`
	// CapacityType limits ice to "spot" or "on-demand" (default both).
	CapacityType string `json:"capacityType,omitempty"`
	// For is how long the pool stays out of capacity (ice; 0 = until up
	// stops).
	For time.Duration `json:"for,omitempty"`
	// Price is the new hourly spot price (price).
	Price float64 `json:"price,omitempty"`
}

// Control serves the fault buttons on 127.0.0.1 for the other shells'
// `nodewright local spot-interrupt|rebalance|ice|price`.
type Control struct {
	cloud *localcloud.Cloud
	tl    *Timeline
	srv   *http.Server
	ln    net.Listener
}

// StartControl listens on a free loopback port.
func StartControl(cloud *localcloud.Cloud, tl *Timeline) (*Control, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("control listener: %w", err)
	}
	c := &Control{cloud: cloud, tl: tl, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fault", c.serveFault)
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// URL is the control endpoint's base URL.
func (c *Control) URL() string { return "http://" + c.ln.Addr().String() }

// Close stops serving.
func (c *Control) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.srv.Shutdown(ctx)
}

func (c *Control) serveFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&f); err != nil {
		http.Error(w, "decode fault: "+err.Error(), http.StatusBadRequest)
		return
	}
	msg, err := c.Apply(r.Context(), f)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	c.tl.Printf("%-12s %s", "fault", msg)
	_, _ = io.WriteString(w, msg)
}

// Apply presses one button and says what it did.
func (c *Control) Apply(ctx context.Context, f Fault) (string, error) {
	sim := c.cloud.AWS
	switch f.Action {
	case "spot-interrupt", "rebalance":
		id, err := c.instanceID(ctx, f.Node)
		if err != nil {
			return "", err
		}
		if f.Action == "rebalance" {
			return "rebalance recommendation for " + id, sim.RecommendRebalance(id)
		}
		return fmt.Sprintf("spot interruption warning for %s; EC2 reclaims it after %s", id, sim.Options().Delays.SpotInterruption), sim.ReclaimSpot(id)
	case "ice":
		return c.ice(f)
	case "price":
		if err := c.pool(f.Type, f.Zone); err != nil {
			return "", err
		}
		if f.Price <= 0 {
			return "", fmt.Errorf("price %v: want a positive hourly price", f.Price)
		}
		sim.EC2().SetSpotPrice(f.Type, f.Zone, f.Price)
		return fmt.Sprintf("spot price of %s in %s set to $%.4f/h", f.Type, f.Zone, f.Price), nil
	}
	return "", fmt.Errorf("unknown fault %q", f.Action)
}

// ice makes a pool (both capacity types unless one is named) answer
// InsufficientInstanceCapacity, for f.For when set.
func (c *Control) ice(f Fault) (string, error) {
	if err := c.pool(f.Type, f.Zone); err != nil {
		return "", err
	}
	kinds := []string{"spot", "on-demand"}
	switch f.CapacityType {
	case "":
	case "spot", "on-demand":
		kinds = []string{f.CapacityType}
	default:
		return "", fmt.Errorf("capacity type %q: want spot or on-demand", f.CapacityType)
	}
	sim := c.cloud.AWS.EC2()
	for _, k := range kinds {
		sim.SetCapacity(ec2sim.Pool{InstanceType: f.Type, Zone: f.Zone, CapacityType: k}, 0)
	}
	msg := fmt.Sprintf("no %s capacity for %s in %s", strings.Join(kinds, " or "), f.Type, f.Zone)
	if f.For <= 0 {
		return msg + " until `local up` stops", nil
	}
	time.AfterFunc(f.For, func() {
		for _, k := range kinds {
			sim.SetCapacity(ec2sim.Pool{InstanceType: f.Type, Zone: f.Zone, CapacityType: k}, -1)
		}
		c.tl.Printf("%-12s capacity for %s in %s is back", "fault", f.Type, f.Zone)
	})
	return fmt.Sprintf("%s for %s", msg, f.For), nil
}

func (c *Control) pool(typ, zone string) error {
	if !c.cloud.AWS.EC2().Config().Catalog.Offered(typ, zone) {
		return fmt.Errorf("%s is not offered in %s in this region (%s)", typ, zone, c.cloud.Region)
	}
	return nil
}

// instanceID resolves a node name (through its providerID) or takes an
// instance ID as it is.
func (c *Control) instanceID(ctx context.Context, node string) (string, error) {
	if strings.HasPrefix(node, "i-") {
		return node, nil
	}
	if node == "" {
		return "", errors.New("no node given")
	}
	n, err := c.cloud.KubeClient.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	id := n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("node %s has no EC2 instance (providerID %q)", node, n.Spec.ProviderID)
	}
	return id, nil
}

// Press sends f to the control endpoint at url and returns what it did.
func Press(ctx context.Context, url string, f Fault) (string, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/fault", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("reach the running `local up` at %s: %w", url, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(strings.TrimSpace(string(msg)))
	}
	return string(msg), nil
}
