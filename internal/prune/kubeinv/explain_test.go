package kubeinv

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
)

// S3 errors name the endpoint and the credentials and where each came
// from, not the SDK's chain alone.
func TestExplain(t *testing.T) {
	s := S3Settings{Bucket: "kb-backups", Endpoint: "http://minio.storage:9000", EndpointSource: "BackupRepo repo spec.config.endpoint",
		CredentialSource: SourceGeneratedSecret, CredentialRef: "kb-system/repo-secret"}
	cases := []struct {
		name string
		err  error
		want []string
	}{
		{"wrong key", &smithy.GenericAPIError{Code: "InvalidAccessKeyId", Message: "The access key does not exist"},
			[]string{"S3 endpoint http://minio.storage:9000 (from BackupRepo repo spec.config.endpoint) refused the credentials from Secret kb-system/repo-secret (status.generatedCSIDriverSecret) (InvalidAccessKeyId)"}},
		{"wrong secret", &smithy.GenericAPIError{Code: "SignatureDoesNotMatch"}, []string{"refused the credentials", "SignatureDoesNotMatch"}},
		{"no bucket", &smithy.GenericAPIError{Code: "NoSuchBucket"}, []string{"bucket kb-backups does not exist at S3 endpoint http://minio.storage:9000", "--bucket"}},
		{"unreachable", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, []string{"cannot reach S3 endpoint http://minio.storage:9000 (from BackupRepo repo spec.config.endpoint)"}},
		{"plain http behind https", errors.New(`Get "https://minio.storage:9000/": http: server gave HTTP response to HTTPS client`), []string{"speaks plain HTTP"}},
		{"bad certificate", errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority"), []string{"failed TLS verification", "--ca-file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := s.Explain(c.err)
			if !errors.Is(got, c.err) {
				t.Fatalf("the cause is lost: %v", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("%q misses %q", got, w)
				}
			}
		})
	}
	other := errors.New("something else")
	if s.Explain(other) != other {
		t.Fatal("an unknown error must pass through")
	}
}
