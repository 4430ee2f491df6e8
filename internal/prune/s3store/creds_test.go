package s3store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// isolateAWS clears every AWS_ variable, points HOME and both shared files
// at an empty temp dir and disables IMDS, so the chain sees only what a test
// sets and never reaches the link-local metadata address.
func isolateAWS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
			_ = os.Unsetenv(k)
		}
	}
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return dir
}

// fakeSTS answers AssumeRoleWithWebIdentity and AssumeRole with fixed
// credentials and records each form it received.
type fakeSTS struct {
	mu    sync.Mutex
	forms []map[string]string
}

func (f *fakeSTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	form := map[string]string{"Authorization": r.Header.Get("Authorization")}
	for k := range r.PostForm {
		form[k] = r.PostForm.Get(k)
	}
	f.mu.Lock()
	f.forms = append(f.forms, form)
	f.mu.Unlock()
	action := form["Action"]
	if action != "AssumeRoleWithWebIdentity" && action != "AssumeRole" {
		http.Error(w, "unexpected action "+action, http.StatusBadRequest)
		return
	}
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<%[1]sResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <%[1]sResult>
    <Credentials>
      <AccessKeyId>ASIASTS%[2]s</AccessKeyId>
      <SecretAccessKey>sts-secret-%[2]s</SecretAccessKey>
      <SessionToken>sts-session-%[2]s</SessionToken>
      <Expiration>%[3]s</Expiration>
    </Credentials>
    <AssumedRoleUser><Arn>%[4]s/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser>
  </%[1]sResult>
  <ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata>
</%[1]sResponse>`, action, strings.ToUpper(action[len(action)-4:]), exp, form["RoleArn"])
}

func (f *fakeSTS) calls() []map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]string(nil), f.forms...)
}

// fakeIMDS is the IMDSv2 token PUT and the role-credentials GETs.
type fakeIMDS struct {
	mu    sync.Mutex
	paths []string
}

const imdsToken = "imds-session-token"

func (f *fakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
		if r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") == "" {
			http.Error(w, "no ttl", http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
		_, _ = w.Write([]byte(imdsToken))
		return
	}
	if r.Header.Get("X-Aws-Ec2-Metadata-Token") != imdsToken {
		http.Error(w, "IMDSv2 token required", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/latest/meta-data/iam/security-credentials/":
		_, _ = w.Write([]byte("snapflow-node-role\n"))
	case "/latest/meta-data/iam/security-credentials/snapflow-node-role":
		_ = json.NewEncoder(w).Encode(map[string]string{
			"Code": "Success", "Type": "AWS-HMAC", "LastUpdated": time.Now().UTC().Format(time.RFC3339),
			"AccessKeyId": "ASIAIMDSROLE", "SecretAccessKey": "imds-secret", "Token": "imds-session",
			"Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		})
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeIMDS) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultChain_9_2(t *testing.T) {
	type env struct {
		dir  string
		sts  *fakeSTS
		imds *fakeIMDS
		url  struct{ sts, imds string }
	}
	irsa := func(t *testing.T, e *env) {
		writeFile(t, filepath.Join(e.dir, "token"), "projected-sa-jwt")
		t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::111122223333:role/snapflow-prune")
		t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", filepath.Join(e.dir, "token"))
		t.Setenv("AWS_ENDPOINT_URL_STS", e.url.sts)
	}
	imds := func(t *testing.T, e *env) {
		t.Setenv("AWS_EC2_METADATA_DISABLED", "")
		_ = os.Unsetenv("AWS_EC2_METADATA_DISABLED")
		t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", e.url.imds)
	}
	tests := []struct {
		name      string
		setup     func(t *testing.T, e *env)
		wantKey   string
		wantToken string
		wantErr   []string
		check     func(t *testing.T, e *env)
	}{{
		name:  "irsa web identity through STS",
		setup: irsa, wantKey: "ASIASTSTITY", wantToken: "sts-session-TITY",
		check: func(t *testing.T, e *env) {
			calls := e.sts.calls()
			if len(calls) != 1 {
				t.Fatalf("STS calls %v", calls)
			}
			c := calls[0]
			if c["Action"] != "AssumeRoleWithWebIdentity" || c["WebIdentityToken"] != "projected-sa-jwt" ||
				c["RoleArn"] != "arn:aws:iam::111122223333:role/snapflow-prune" || c["RoleSessionName"] == "" {
				t.Fatalf("STS form %v", c)
			}
			if len(e.imds.seen()) != 0 {
				t.Fatalf("IMDS asked: %v", e.imds.seen())
			}
		},
	}, {
		name:  "ec2 instance role through IMDSv2",
		setup: imds, wantKey: "ASIAIMDSROLE", wantToken: "imds-session",
		check: func(t *testing.T, e *env) {
			seen := e.imds.seen()
			if len(seen) < 3 || seen[0] != "PUT /latest/api/token" {
				t.Fatalf("IMDS requests %v, want the token PUT first", seen)
			}
		},
	}, {
		name: "environment keys win over web identity and IMDS",
		setup: func(t *testing.T, e *env) {
			irsa(t, e)
			imds(t, e)
			writeFile(t, filepath.Join(e.dir, "credentials"), "[default]\naws_access_key_id = AKIAFILE\naws_secret_access_key = file-secret\n")
			t.Setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
			t.Setenv("AWS_SESSION_TOKEN", "env-session")
		},
		wantKey: "AKIAENVIRONMENT", wantToken: "env-session",
		check: func(t *testing.T, e *env) {
			if len(e.sts.calls()) != 0 || len(e.imds.seen()) != 0 {
				t.Fatalf("STS %v IMDS %v asked although the environment has keys", e.sts.calls(), e.imds.seen())
			}
		},
	}, {
		name: "shared profile assumes role_arn from its source_profile",
		setup: func(t *testing.T, e *env) {
			writeFile(t, filepath.Join(e.dir, "credentials"), "[base]\naws_access_key_id = AKIABASEPROFILE\naws_secret_access_key = base-secret\n")
			writeFile(t, filepath.Join(e.dir, "config"), "[profile prune]\nrole_arn = arn:aws:iam::111122223333:role/from-profile\nsource_profile = base\n")
			t.Setenv("AWS_PROFILE", "prune")
			t.Setenv("AWS_ENDPOINT_URL_STS", e.url.sts)
		},
		wantKey: "ASIASTSROLE", wantToken: "sts-session-ROLE",
		check: func(t *testing.T, e *env) {
			calls := e.sts.calls()
			if len(calls) != 1 || calls[0]["RoleArn"] != "arn:aws:iam::111122223333:role/from-profile" ||
				!strings.Contains(calls[0]["Authorization"], "Credential=AKIABASEPROFILE/") {
				t.Fatalf("STS calls %v, want AssumeRole signed with the source profile", calls)
			}
		},
	}, {
		name: "shared profile credential_process",
		setup: func(t *testing.T, e *env) {
			writeFile(t, filepath.Join(e.dir, "config"), "[default]\ncredential_process = echo '{\"Version\": 1, \"AccessKeyId\": \"AKIAPROCESS\", \"SecretAccessKey\": \"process-secret\"}'\n")
		},
		wantKey: "AKIAPROCESS",
	}, {
		name:    "nothing configured names every place it looked",
		setup:   func(*testing.T, *env) {},
		wantErr: []string{"AWS_ACCESS_KEY_ID", `profile "default"`, "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "instance metadata service (disabled by AWS_EC2_METADATA_DISABLED)", "--use-backup-repo-credentials=true"},
		check: func(t *testing.T, e *env) {
			if len(e.sts.calls()) != 0 || len(e.imds.seen()) != 0 {
				t.Fatalf("a server was asked: STS %v IMDS %v", e.sts.calls(), e.imds.seen())
			}
		},
	}, {
		name:    "a named profile that does not exist fails at load",
		setup:   func(t *testing.T, e *env) { t.Setenv("AWS_PROFILE", "missing") },
		wantErr: []string{"load the AWS default credential chain", `profile "missing"`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{dir: isolateAWS(t), sts: &fakeSTS{}, imds: &fakeIMDS{}}
			stsSrv, imdsSrv := httptest.NewServer(e.sts), httptest.NewServer(e.imds)
			t.Cleanup(stsSrv.Close)
			t.Cleanup(imdsSrv.Close)
			e.url.sts, e.url.imds = stsSrv.URL, imdsSrv.URL
			tc.setup(t, e)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var cr aws.Credentials
			p, err := DefaultChain(ctx, "eu-west-1")
			if err == nil {
				cr, err = p.Retrieve(ctx)
			}
			switch {
			case tc.wantErr != nil && err == nil:
				t.Fatalf("got credentials %s, want an error", cr.AccessKeyID)
			case tc.wantErr != nil:
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error lacks %q:\n%v", s, err)
					}
				}
			case err != nil:
				t.Fatal(err)
			case cr.AccessKeyID != tc.wantKey || cr.SessionToken != tc.wantToken || cr.SecretAccessKey == "":
				t.Fatalf("credentials %q/%q, want %q/%q", cr.AccessKeyID, cr.SessionToken, tc.wantKey, tc.wantToken)
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

// A Store without Credentials signs with what the chain found, in the
// region the BackupRepo names rather than AWS_REGION, and --debug output
// carries none of the chain's secrets.
func TestStoreUsesDefaultChain_9_2_10_9(t *testing.T) {
	dir := isolateAWS(t)
	sts := &fakeSTS{}
	stsSrv := httptest.NewServer(sts)
	t.Cleanup(stsSrv.Close)
	writeFile(t, filepath.Join(dir, "token"), "projected-sa-jwt")
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::111122223333:role/snapflow-prune")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", filepath.Join(dir, "token"))
	t.Setenv("AWS_ENDPOINT_URL_STS", stsSrv.URL)
	t.Setenv("AWS_REGION", "us-west-2")

	f := &fakeS3{pages: []string{`<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>`}}
	s3Srv := httptest.NewServer(f)
	t.Cleanup(s3Srv.Close)
	var log bytes.Buffer
	s, err := New(Config{Bucket: "bkt", Endpoint: s3Srv.URL, PathStyle: true, Region: "eu-central-1", Debug: &log})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListAll(context.Background(), "", false); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("S3 requests %d", len(reqs))
	}
	auth := reqs[0].header.Get("Authorization")
	if !strings.Contains(auth, "Credential=ASIASTSTITY/") || !strings.Contains(auth, "/eu-central-1/s3/") {
		t.Fatalf("Authorization %q: want the STS key and the BackupRepo region", auth)
	}
	if got := reqs[0].header.Get("X-Amz-Security-Token"); got != "sts-session-TITY" {
		t.Fatalf("session token %q", got)
	}
	out := log.String()
	if !strings.Contains(out, "CANONICAL") {
		t.Fatalf("no signing log:\n%s", out)
	}
	for _, secret := range []string{"ASIASTSTITY", "sts-secret-TITY", "sts-session-TITY", "projected-sa-jwt"} {
		if strings.Contains(out, secret) {
			t.Errorf("debug output contains %q:\n%s", secret, out)
		}
	}
}
