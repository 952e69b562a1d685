package inspect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// StackOutputs reads a CloudFormation stack's outputs (OutputKey ->
// OutputValue) with one DescribeStacks call over the Query protocol, signed
// with the caller's credentials. The project pins no CloudFormation SDK
// client and one read-only call does not justify one. The endpoint follows
// the SDK's conventions: AWS_ENDPOINT_URL_CLOUDFORMATION, then
// AWS_ENDPOINT_URL, then the regional endpoint.
func StackOutputs(ctx context.Context, cfg sdkaws.Config, stack string, client *http.Client) (map[string]string, error) {
	if cfg.Region == "" {
		return nil, fmt.Errorf("describe stack %s: no region (set --region or AWS_REGION)", stack)
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("describe stack %s: no AWS credentials", stack)
	}
	endpoint := os.Getenv("AWS_ENDPOINT_URL_CLOUDFORMATION")
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if endpoint == "" {
		endpoint = fmt.Sprintf("https://cloudformation.%s.amazonaws.com", cfg.Region)
		if strings.HasPrefix(cfg.Region, "cn-") {
			endpoint += ".cn"
		}
	}
	form := url.Values{"Action": {"DescribeStacks"}, "Version": {"2010-05-15"}, "StackName": {stack}}
	body := []byte(form.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(endpoint, "/")+"/", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: %w", stack, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: credentials: %w", stack, err)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "cloudformation", cfg.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("describe stack %s: sign: %w", stack, err)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: %w", stack, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: read response: %w", stack, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code    string `xml:"Code"`
				Message string `xml:"Message"`
			} `xml:"Error"`
		}
		if xml.Unmarshal(data, &e) == nil && e.Error.Code != "" {
			return nil, fmt.Errorf("describe stack %s: %s: %s", stack, e.Error.Code, e.Error.Message)
		}
		return nil, fmt.Errorf("describe stack %s: HTTP %d", stack, resp.StatusCode)
	}
	return parseStackOutputs(stack, data)
}

func parseStackOutputs(stack string, data []byte) (map[string]string, error) {
	var r struct {
		Stacks []struct {
			StackName string `xml:"StackName"`
			Outputs   []struct {
				Key   string `xml:"OutputKey"`
				Value string `xml:"OutputValue"`
			} `xml:"Outputs>member"`
		} `xml:"DescribeStacksResult>Stacks>member"`
	}
	if err := xml.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("describe stack %s: decode response: %w", stack, err)
	}
	if len(r.Stacks) == 0 {
		return nil, fmt.Errorf("describe stack %s: no such stack in the response", stack)
	}
	out := map[string]string{}
	for _, o := range r.Stacks[0].Outputs {
		out[o.Key] = o.Value
	}
	return out, nil
}

// OutputTableName is the stack output naming the DynamoDB table (infra/).
const OutputTableName = "TableName"
