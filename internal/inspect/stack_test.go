package inspect

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// A DescribeStacks response as CloudFormation sends it (abridged).
const describeStacksXML = `<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/">
  <DescribeStacksResult>
    <Stacks>
      <member>
        <StackName>nodewright-prod</StackName>
        <StackStatus>UPDATE_COMPLETE</StackStatus>
        <Outputs>
          <member>
            <Description>DynamoDB table</Description>
            <OutputKey>TableName</OutputKey>
            <OutputValue>nodewright-prod-Table12345-ABCDEF</OutputValue>
          </member>
          <member>
            <OutputKey>WorkQueueUrl</OutputKey>
            <OutputValue>https://sqs.eu-west-1.amazonaws.com/123456789012/work</OutputValue>
          </member>
        </Outputs>
      </member>
    </Stacks>
  </DescribeStacksResult>
</DescribeStacksResponse>`

func TestStackOutputs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		auth := r.Header.Get("Authorization")
		if !strings.Contains(auth, "/eu-west-1/cloudformation/aws4_request") || !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") {
			t.Errorf("not signed for cloudformation in eu-west-1: %q", auth)
		}
		if r.Form.Get("Action") != "DescribeStacks" || r.Form.Get("Version") != "2010-05-15" {
			t.Errorf("form %v", r.Form)
		}
		if r.Form.Get("StackName") != "nodewright-prod" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`<ErrorResponse><Error><Type>Sender</Type><Code>ValidationError</Code><Message>Stack with id ` + r.Form.Get("StackName") + ` does not exist</Message></Error></ErrorResponse>`))
			return
		}
		w.Write([]byte(describeStacksXML))
	}))
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", srv.URL)
	cfg := sdkaws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	out, err := StackOutputs(context.Background(), cfg, "nodewright-prod", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if out[OutputTableName] != "nodewright-prod-Table12345-ABCDEF" || len(out) != 2 {
		t.Errorf("outputs %v", out)
	}
	_, err = StackOutputs(context.Background(), cfg, "nodewright-nope", srv.Client())
	if err == nil || !strings.Contains(err.Error(), "ValidationError: Stack with id nodewright-nope does not exist") {
		t.Errorf("missing stack: %v", err)
	}
	if _, err := StackOutputs(context.Background(), sdkaws.Config{Credentials: cfg.Credentials}, "x", nil); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("no region: %v", err)
	}
}
