// Package awsstore adapts internal/store's DynamoDB repository to the small
// interfaces internal/aws declares (ICEStore, PriceStore), so the launch path
// shares its unavailable-offerings set and price cache with every function.
package awsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/store"
)

// ICE implements aws.ICEStore on the store's ICE set.
type ICE struct{ Store *store.Store }

var _ aws.ICEStore = ICE{}

// PutUnavailable records the offering until expires.
func (a ICE) PutUnavailable(ctx context.Context, k aws.OfferingKey, expires time.Time, reason string) error {
	return a.Store.MarkUnavailable(ctx, k, expires, reason)
}

// ListUnavailable returns the unexpired entries.
func (a ICE) ListUnavailable(ctx context.Context) (map[aws.OfferingKey]time.Time, error) {
	got, err := a.Store.UnavailableOfferings(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[aws.OfferingKey]time.Time, len(got))
	for o, u := range got {
		out[o] = u.Until
	}
	return out, nil
}

// Prices implements aws.PriceStore as one JSON blob per region.
type Prices struct{ Store *store.Store }

var _ aws.PriceStore = Prices{}

// BlobName is the store blob holding region's price snapshot.
func BlobName(region string) string { return "prices/" + region }

// LoadPrices returns the stored snapshot, or nil when there is none.
func (a Prices) LoadPrices(ctx context.Context, region string) (*aws.PriceSnapshot, error) {
	var s aws.PriceSnapshot
	if _, err := a.Store.GetJSON(ctx, BlobName(region), &s); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("load prices %s: %w", region, err)
	}
	return &s, nil
}

// SavePrices stores s under its region.
func (a Prices) SavePrices(ctx context.Context, s *aws.PriceSnapshot) error {
	if s == nil || s.Region == "" {
		return errors.New("save prices: snapshot without region")
	}
	if err := a.Store.PutJSON(ctx, BlobName(s.Region), s, s.FetchedAt); err != nil {
		return fmt.Errorf("save prices %s: %w", s.Region, err)
	}
	return nil
}
