package events

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

const testRoot = "pvc-0a3c1a2e-6d2b-4f47-9b7e-2f7f8a1f0c11"

// TestDecodeS3NotificationRecorded decodes recorded bodies of every
// format. The versitygw-* files were captured from versitygw's
// --event-webhook-url (the legacy array is its older shape); the others
// follow the AWS, SNS, SQS, EventBridge and MinIO documentation.
func TestDecodeS3NotificationRecorded(t *testing.T) {
	awsPut := S3Record{Bucket: "kb-backups", Key: testRoot + "/app/pg-0f0e4bde-1f6c-4a0e-8d1c-6f0bd1d2f6a9/postgresql/bückup 1/kubeblocks-backup.json",
		EventName: "ObjectCreated:Put", Size: 1024, ETag: "d41d8cd98f00b204e9800998ecf8427e", VersionID: "096fKKXTRTtl3on89fVO.nfljtsv6qko",
		Sequencer: "0055AED6DCD90281E5", Time: time.Date(2026, 11, 30, 10, 15, 0, 123e6, time.UTC), Source: "aws:s3", Region: "us-east-1"}
	vgPut := S3Record{Bucket: "cap", Key: testRoot + "/ns/red flower+x%.txt", EventName: "ObjectCreated:Put", Size: 5,
		ETag: `"5d41402abc4b2a76b9719d911017c592"`, Sequencer: "1", Time: time.Date(2026, 12, 2, 3, 54, 48, 0, time.UTC), Source: "aws:s3", Region: "us-east-1"}
	const topic = "arn:aws:sns:us-east-1:123456789012:kb-backups-events"
	tests := []struct {
		file string
		want S3Notification
	}{
		{"aws-put.json", S3Notification{Records: []S3Record{awsPut}}},
		{"aws-delete-marker.json", S3Notification{Records: []S3Record{{Bucket: "kb-backups", Key: testRoot + "/loose", EventName: "ObjectRemoved:DeleteMarkerCreated",
			VersionID: "Tb2DRCq4vbcYEXAMPLEmarker", Sequencer: "0055AED6DCD90281F0", Time: time.Date(2026, 11, 30, 10, 16, 0, 0, time.UTC), Source: "aws:s3", Region: "eu-west-1"}}}},
		{"aws-test-event.json", S3Notification{Test: true}},
		{"sns-notification.json", S3Notification{Records: []S3Record{awsPut}, TopicARN: topic}},
		{"sns-subscription-confirmation.json", S3Notification{TopicARN: topic,
			SubscribeURL: "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-east-1:123456789012:kb-backups-events&Token=2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736"}},
		{"sqs-message.json", S3Notification{Records: []S3Record{awsPut}}},
		{"lambda-sqs-sns-batch.json", S3Notification{Records: []S3Record{awsPut}, TopicARN: topic}},
		{"eventbridge-object-created.json", S3Notification{Records: []S3Record{{Bucket: "kb-backups", Key: testRoot + "/app/data file",
			EventName: "ObjectCreated:CompleteMultipartUpload", Size: 5, ETag: "b1946ac92492d2347c6235b4d2611184", VersionID: "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
			Sequencer: "617f08299329d189", Time: time.Date(2026, 11, 30, 10, 15, 0, 0, time.UTC), Source: "aws.s3", Region: "ca-central-1"}}}},
		{"eventbridge-object-deleted.json", S3Notification{Records: []S3Record{{Bucket: "kb-backups", Key: testRoot + "/app/x",
			EventName: "ObjectRemoved:DeleteMarkerCreated", ETag: "d41d8cd98f00b204e9800998ecf8427e", VersionID: "1QW9g1Z99LUNbvaaYVpW9xDlOLU.qxgF",
			Sequencer: "617f0837b476e463", Time: time.Date(2026, 11, 30, 10, 20, 0, 0, time.UTC), Source: "aws.s3", Region: "ca-central-1"}}}},
		// Tags change no content: no record, no error.
		{"eventbridge-object-tags-added.json", S3Notification{}},
		{"minio-webhook-put.json", S3Notification{Records: []S3Record{{Bucket: "kb-backups", Key: testRoot + "/ns/a b+c.txt", EventName: "ObjectCreated:Put",
			Size: 11, ETag: "5eb63bbbe01eeed093cb22bb8f5acdc3", Sequencer: "187C1F9E3A5E8F10", Time: time.Date(2026, 11, 30, 10, 15, 0, 789e6, time.UTC), Source: "minio:s3"}}}},
		{"minio-webhook-delete.json", S3Notification{Records: []S3Record{{Bucket: "kb-backups", Key: testRoot + "/ns/a b+c.txt", EventName: "ObjectRemoved:Delete",
			Sequencer: "187C1F9E4B6D7E20", Time: time.Date(2026, 11, 30, 10, 15, 0, 789e6, time.UTC), Source: "minio:s3"}}}},
		{"versitygw-test-event.json", S3Notification{Test: true}},
		{"versitygw-put.json", S3Notification{Records: []S3Record{vgPut}}},
		{"versitygw-legacy-array.json", S3Notification{Records: []S3Record{vgPut}}},
		{"versitygw-delete.json", S3Notification{Records: []S3Record{{Bucket: "cap", Key: testRoot + "/ns/red flower+x%.txt", EventName: "ObjectRemoved:Delete",
			Sequencer: "2", Time: vgPut.Time, Source: "aws:s3", Region: "us-east-1"}}}},
		{"versitygw-delete-objects.json", S3Notification{Records: []S3Record{{Bucket: "cap", Key: "a/b", EventName: "ObjectRemoved:DeleteObjects",
			Sequencer: "4", Time: vgPut.Time, Source: "aws:s3", Region: "us-east-1"}}}},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeS3Notification(body)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("testdata/%s has no test case", filepath.Base(f))
		}
	}
}

func TestDecodeS3NotificationMalformed(t *testing.T) {
	tests := []struct{ name, body string }{
		{"empty", ""},
		{"not json", "Records=1"},
		{"a string", `"hello"`},
		{"unknown object", `{"hello":"world"}`},
		{"record without s3", `{"Records":[{"eventName":"ObjectCreated:Put"}]}`},
		{"record without key", `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{}}}]}`},
		{"record without event name", `{"Records":[{"s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`},
		{"bad escape", `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"a%zz"}}}]}`},
		{"negative size", `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k","size":-1}}}]}`},
		{"Records not a list", `{"Records":{"a":1}}`},
		{"sns without message body", `{"Type":"Notification","Message":"not json"}`},
		{"confirmation without url", `{"Type":"SubscriptionConfirmation","TopicArn":"t"}`},
		{"eventbridge without key", `{"detail-type":"Object Created","source":"aws.s3","detail":{"bucket":{"name":"b"},"object":{}}}`},
		{"nested too deep", nest(`{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`, maxEnvelopes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeS3Notification([]byte(tt.body))
			if !errors.Is(err, ErrMalformed) || !IsClientError(err) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

// nest wraps body in n SQS envelopes.
func nest(body string, n int) string {
	for range n {
		b, _ := json.Marshal(map[string]string{"Body": body})
		body = string(b)
	}
	return body
}

func TestDecodeS3NotificationNesting(t *testing.T) {
	inner := `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`
	if n, err := DecodeS3Notification([]byte(nest(inner, maxEnvelopes-1))); err != nil || len(n.Records) != 1 {
		t.Fatalf("%d envelopes: %+v %v", maxEnvelopes-1, n, err)
	}
	if _, err := DecodeS3Notification([]byte(nest(inner, maxEnvelopes))); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%d envelopes: %v, want ErrMalformed", maxEnvelopes, err)
	}
}

func TestDecodeS3Event(t *testing.T) {
	put, err := os.ReadFile(filepath.Join("testdata", "aws-put.json"))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(typ string, data []byte) event.Event {
		e := event.New()
		e.SetID("1")
		e.SetType(typ)
		e.SetSource("test")
		if data != nil {
			_ = e.SetData(event.ApplicationJSON, data)
		}
		return e
	}
	tests := []struct {
		name    string
		e       event.Event
		records int
		key     string
		test    bool
		bad     bool
	}{
		{name: "snapflow source", e: mk(S3ObjectNotification, []byte(`{"bucket":"b","key":"pvc-x/y","eventName":"ObjectCreated:Put"}`)), records: 1, key: "pvc-x/y"},
		{name: "aws adapter message", e: mk(S3TypePrefix+"ObjectCreated:Put", put), records: 1, key: testRoot + "/app/pg-0f0e4bde-1f6c-4a0e-8d1c-6f0bd1d2f6a9/postgresql/bückup 1/kubeblocks-backup.json"},
		{name: "triggermesh record", e: mk(S3LegacyTypePrefix+"objectcreated", []byte(`{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"a+b"}}}`)), records: 1, key: "a b"},
		{name: "adapter test event", e: mk(S3TypePrefix+"s3:TestEvent", nil), test: true},
		{name: "triggermesh test event", e: mk(S3LegacyTypePrefix+"testevent", nil), test: true},
		{name: "not s3", e: mk(Ping, []byte(`{}`)), bad: true},
		{name: "no data", e: mk(S3ObjectNotification, nil), bad: true},
		{name: "unknown field", e: mk(S3ObjectNotification, []byte(`{"bucket":"b","key":"k","eventName":"ObjectCreated:Put","x":1}`)), bad: true},
		{name: "missing key", e: mk(S3ObjectNotification, []byte(`{"bucket":"b","eventName":"ObjectCreated:Put"}`)), bad: true},
		{name: "adapter garbage", e: mk(S3TypePrefix+"ObjectCreated:Put", []byte(`{"x":1}`)), bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := DecodeS3Event(tt.e)
			if tt.bad {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.Test != tt.test || len(n.Records) != tt.records || tt.records > 0 && n.Records[0].Key != tt.key {
				t.Fatalf("got %+v", n)
			}
		})
	}
}

func TestS3RecordKinds(t *testing.T) {
	tests := []struct {
		name             string
		created, removed bool
	}{
		{"ObjectCreated:Put", true, false},
		{"ObjectCreated:CompleteMultipartUpload", true, false},
		{"ObjectRemoved:DeleteObjects", false, true},
		{"LifecycleExpiration:Delete", false, true},
		{"ObjectTagging:Put", false, false},
	}
	for _, tt := range tests {
		r := S3Record{EventName: tt.name}
		if r.IsCreated() != tt.created || r.IsRemoved() != tt.removed {
			t.Errorf("%s: created %t removed %t", tt.name, r.IsCreated(), r.IsRemoved())
		}
	}
}
