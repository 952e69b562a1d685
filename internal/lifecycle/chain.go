package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
)

// Work chains. A claim in progress is followed by a chain of work messages,
// each step sending the next. SQS delivers at least once, so a duplicate
// would start a second chain running beside the first for ever (each step
// listing every VolumeAttachment). The claim's current chain, the token of
// the message its last step sent and when that message is due, is kept in
// the table; a message of any other chain is dropped.
//
// A step sends its message before it records it: killed in between, the
// step's own message is redelivered (its chain is still current) and runs
// again, and the unrecorded message is dropped when it arrives. A chain
// whose message never arrives is restarted by the scheduled pass once it is
// overdue by chainLostAfter.
const (
	chainKeyPrefix = "lifecycle-chain/"
	// chainTTL lets the records of finished claims expire.
	chainTTL       = 24 * time.Hour
	chainLostAfter = 2 * scheduleInterval
)

type chainRecord struct {
	Token string    `json:"token"`
	Due   time.Time `json:"due"`
}

func chainKey(claim string) string { return chainKeyPrefix + claim }

// currentChain reports whether msg belongs to its claim's current chain. A
// message that starts work (no chain) always does, and so does any message
// when no chain is recorded (never started, or expired).
func (c *Controller) currentChain(ctx context.Context, msg queue.Message) (bool, error) {
	if msg.Chain == "" {
		return true, nil
	}
	rec, _, err := c.chain(ctx, msg.Subject)
	if err != nil {
		return false, err
	}
	return rec.Token == "" || rec.Token == msg.Chain, nil
}

// chain reads the claim's chain record; a missing or unreadable one is the
// zero record (the next step overwrites it).
func (c *Controller) chain(ctx context.Context, claim string) (chainRecord, int64, error) {
	kv, err := c.d.Store.GetKV(ctx, chainKey(claim))
	if errors.Is(err, store.ErrNotFound) {
		return chainRecord{}, 0, nil
	}
	if err != nil {
		return chainRecord{}, 0, fmt.Errorf("lifecycle: read work chain of nodeclaim %s: %w", claim, err)
	}
	var rec chainRecord
	if json.Unmarshal(kv.Value, &rec) != nil {
		return chainRecord{}, kv.Version, nil
	}
	return rec, kv.Version, nil
}

// requeue continues the claim's chain with a new message after delay and
// makes it the current one.
func (c *Controller) requeue(ctx context.Context, claim, reason string, delay time.Duration) error {
	if c.d.Requeue == nil {
		return nil
	}
	token, err := newChainToken()
	if err != nil {
		return err
	}
	now := c.d.Now()
	msg := queue.Message{Kind: queue.KindLifecycle, Subject: claim, Reason: reason, SentAt: now, Chain: token}
	if err := c.d.Requeue(ctx, msg, delay); err != nil {
		return fmt.Errorf("lifecycle: requeue nodeclaim %s: %w", claim, err)
	}
	return c.recordChain(ctx, claim, chainRecord{Token: token, Due: now.Add(min(delay, queue.MaxDelay))})
}

// recordChain makes rec the claim's current chain. Losing a race to another
// step is fine: that step's message is current and ours will be dropped.
func (c *Controller) recordChain(ctx context.Context, claim string, rec chainRecord) error {
	_, version, err := c.chain(ctx, claim)
	if err != nil {
		return err
	}
	value, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("lifecycle: encode work chain of nodeclaim %s: %w", claim, err)
	}
	_, err = c.d.Store.PutKV(ctx, chainKey(claim), value, version, chainTTL)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("lifecycle: record work chain of nodeclaim %s: %w", claim, err)
	}
	return nil
}

// chains reads every claim's chain record in one query, for the pass.
func (c *Controller) chains(ctx context.Context) (map[string]chainRecord, error) {
	kvs, err := c.d.Store.ListKV(ctx, chainKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: list work chains: %w", err)
	}
	out := make(map[string]chainRecord, len(kvs))
	for _, kv := range kvs {
		var rec chainRecord
		if json.Unmarshal(kv.Value, &rec) == nil {
			out[kv.Key[len(chainKeyPrefix):]] = rec
		}
	}
	return out, nil
}

// chainLost reports whether the claim's recorded chain should have
// delivered its message long ago: lost, or dropped in the window between
// send and record.
func (v *snapView) chainLost(claim string) bool {
	rec, ok := v.chains[claim]
	return ok && v.c.d.Now().After(rec.Due.Add(chainLostAfter))
}

func newChainToken() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("lifecycle: chain token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
