package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Cache blobs (prices, instance-type catalog) can exceed DynamoDB's 400 KB
// item limit, and without transactions a multi-item value must still never
// be read half-written. So a blob is gzipped, split into parts written under
// a fresh generation id, and only then made visible by one conditional write
// of the head item that names the generation. Readers read the head and then
// that generation's parts; the previous generation is deleted afterwards.
//
// Layout: pk "cache#<key>"; sk "head" {gen, parts, fetchedAt, sha256, size};
// sk "part#<gen>#<nnnnn>" {data}.
const blobPartSize = 300 << 10

// BlobInfo describes a stored blob.
type BlobInfo struct {
	FetchedAt time.Time
	Size      int // uncompressed bytes
	Parts     int
}

// PutBlob stores data under key with the time it was fetched from its source.
// Concurrent writers of one key are serialised by the head's condition: the
// loser's parts are removed and it gets ErrConflict (the value another
// function just stored is as fresh, so callers usually ignore it).
func (s *Store) PutBlob(ctx context.Context, name string, data []byte, fetchedAt time.Time) error {
	if name == "" {
		return errors.New("put blob: empty key")
	}
	pk := pkCachePrefix + name
	prevGen := ""
	head, err := s.getItem(ctx, pk, "head")
	if err != nil {
		return fmt.Errorf("put blob %s: %w", name, err)
	}
	if head != nil {
		if g, ok := head["gen"].(*types.AttributeValueMemberS); ok {
			prevGen = g.Value
		}
	}
	z, err := CompressBlob(name, data)
	if err != nil {
		return err
	}
	gen := newGeneration()
	parts := 0
	for off := 0; off < len(z) || parts == 0; off += blobPartSize {
		end := min(off+blobPartSize, len(z))
		item := key(pk, partKey(gen, parts))
		item["data"] = &types.AttributeValueMemberB{Value: z[off:end]}
		if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
			s.deleteParts(ctx, pk, gen, parts+1)
			return fmt.Errorf("put blob %s part %d: %w", name, parts, err)
		}
		parts++
	}
	sum := sha256.Sum256(data)
	headItem := key(pk, "head")
	headItem["gen"] = sAttr(gen)
	headItem["parts"] = nAttr(int64(parts))
	headItem["size"] = nAttr(int64(len(data)))
	headItem["sha256"] = sAttr(hex.EncodeToString(sum[:]))
	headItem["fetchedAt"] = nAttr(fetchedAt.UnixMilli())
	cond, vals := "attribute_not_exists(#gen)", map[string]types.AttributeValue{}
	if prevGen != "" {
		cond, vals = "#gen = :prev", map[string]types.AttributeValue{":prev": sAttr(prevGen)}
	}
	in := &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: headItem,
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#gen": "gen"},
	}
	if len(vals) > 0 {
		in.ExpressionAttributeValues = vals
	}
	_, err = s.api.PutItem(ctx, in)
	if err != nil {
		s.deleteParts(ctx, pk, gen, parts)
		if isConditionFailed(err) {
			return fmt.Errorf("put blob %s: %w (another writer stored it first)", name, ErrConflict)
		}
		return fmt.Errorf("put blob %s head: %w", name, err)
	}
	if prevGen != "" {
		if n, ok := head["parts"].(*types.AttributeValueMemberN); ok {
			var np int
			fmt.Sscan(n.Value, &np)
			s.deleteParts(ctx, pk, prevGen, np)
		}
	}
	return nil
}

// GetBlob returns the blob stored under key. ErrNotFound if none.
func (s *Store) GetBlob(ctx context.Context, name string) ([]byte, BlobInfo, error) {
	pk := pkCachePrefix + name
	// A writer may replace the generation between our head and part reads;
	// the parts then vanish and one re-read of the head finds the new ones.
	for attempt := 0; ; attempt++ {
		data, info, err := s.readBlob(ctx, pk)
		if errors.Is(err, errBlobTorn) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, BlobInfo{}, fmt.Errorf("get blob %s: %w", name, err)
		}
		return data, info, nil
	}
}

var errBlobTorn = errors.New("blob parts changed while reading")

func (s *Store) readBlob(ctx context.Context, pk string) ([]byte, BlobInfo, error) {
	head, err := s.getItem(ctx, pk, "head")
	if err != nil {
		return nil, BlobInfo{}, err
	}
	if head == nil {
		return nil, BlobInfo{}, ErrNotFound
	}
	gen, _ := head["gen"].(*types.AttributeValueMemberS)
	shaAttr, _ := head["sha256"].(*types.AttributeValueMemberS)
	parts, err1 := numAttr(head, "parts")
	fetched, err2 := numAttr(head, "fetchedAt")
	size, err3 := numAttr(head, "size")
	if gen == nil || shaAttr == nil || errors.Join(err1, err2, err3) != nil {
		return nil, BlobInfo{}, fmt.Errorf("malformed blob head: %w", errors.Join(err1, err2, err3))
	}
	var zipped bytes.Buffer
	got := 0
	err = s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :pre)"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sAttr(pk), ":pre": sAttr("part#" + gen.Value + "#")},
		ConsistentRead:            aws.Bool(true),
	}, func(items []map[string]types.AttributeValue) error {
		for _, it := range items {
			b, ok := it["data"].(*types.AttributeValueMemberB)
			if !ok {
				return errors.New("blob part without data")
			}
			zipped.Write(b.Value)
			got++
		}
		return nil
	})
	if err != nil {
		return nil, BlobInfo{}, err
	}
	if int64(got) != parts {
		return nil, BlobInfo{}, errBlobTorn
	}
	zr, err := gzip.NewReader(&zipped)
	if err != nil {
		return nil, BlobInfo{}, fmt.Errorf("decompress: %w", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, BlobInfo{}, fmt.Errorf("decompress: %w", err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != shaAttr.Value || int64(len(data)) != size {
		return nil, BlobInfo{}, errors.New("blob checksum mismatch")
	}
	return data, BlobInfo{FetchedAt: time.UnixMilli(fetched), Size: len(data), Parts: int(parts)}, nil
}

// PutJSON stores v as a JSON blob (see PutBlob).
func (s *Store) PutJSON(ctx context.Context, name string, v any, fetchedAt time.Time) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("put blob %s: encode: %w", name, err)
	}
	return s.PutBlob(ctx, name, b, fetchedAt)
}

// GetJSON decodes the JSON blob under key into v and returns when it was
// fetched. ErrNotFound if none.
func (s *Store) GetJSON(ctx context.Context, name string, v any) (time.Time, error) {
	b, info, err := s.GetBlob(ctx, name)
	if err != nil {
		return time.Time{}, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return time.Time{}, fmt.Errorf("get blob %s: decode: %w", name, err)
	}
	return info.FetchedAt, nil
}

func (s *Store) deleteParts(ctx context.Context, pk, gen string, n int) {
	// Best effort: a leftover part is invisible (no head names it) and only
	// costs storage; failing the caller for it would be worse.
	for i := 0; i < n; i++ {
		_, _ = s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, partKey(gen, i))})
	}
}

func (s *Store) getItem(ctx context.Context, pk, sk string) (map[string]types.AttributeValue, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

func partKey(gen string, i int) string { return fmt.Sprintf("part#%s#%05d", gen, i) }

func newGeneration() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%s", time.Now().UnixNano(), hex.EncodeToString(b[:]))
}
