package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

// S3Record is one object event of a bucket notification, normalised from
// whichever format carried it.
type S3Record struct {
	Bucket string `json:"bucket"`
	// Key is the object key, URL-decoded.
	Key string `json:"key"`
	// EventName is "ObjectCreated:Put", "ObjectRemoved:Delete" and so on:
	// without the "s3:" prefix MinIO and versitygw add, and with
	// EventBridge's detail types mapped onto the same names.
	EventName string    `json:"eventName"`
	Size      int64     `json:"size,omitempty"`
	ETag      string    `json:"eTag,omitempty"`
	VersionID string    `json:"versionId,omitempty"`
	Sequencer string    `json:"sequencer,omitempty"`
	Time      time.Time `json:"eventTime,omitempty"`
	// Source is the sender's eventSource ("aws:s3", "minio:s3"), or
	// "aws.s3" for EventBridge.
	Source string `json:"eventSource,omitempty"`
	Region string `json:"awsRegion,omitempty"`
}

// IsCreated says whether the event wrote an object.
func (r S3Record) IsCreated() bool { return strings.HasPrefix(r.EventName, "ObjectCreated:") }

// IsRemoved says whether the event removed an object or a version;
// lifecycle expirations remove objects too.
func (r S3Record) IsRemoved() bool {
	return strings.HasPrefix(r.EventName, "ObjectRemoved:") || strings.HasPrefix(r.EventName, "LifecycleExpiration:")
}

// S3Notification is one decoded notification body.
type S3Notification struct {
	Records []S3Record
	// Test marks the s3:TestEvent a server sends when notifications are
	// configured (versitygw: at start-up); it asks for no work.
	Test bool
	// SubscribeURL is set for an SNS SubscriptionConfirmation: fetching it
	// confirms the subscription.
	SubscribeURL string
	// TopicARN is the SNS topic of an SNS message.
	TopicARN string
}

// maxEnvelopes bounds nesting (SNS inside SQS inside a Lambda batch is 3).
const maxEnvelopes = 4

// versitygwConfigurations are the configurationId values versitygw sends;
// it puts keys into notifications as stored, not URL-encoded.
var versitygwConfigurations = map[string]bool{"webhook-global": true, "kafka-global": true, "nats-global": true, "rabbitmq-global": true}

// DecodeS3Notification reads a notification body in any of the formats S3
// servers and AWS services deliver: the S3 message ({"Records": [...]},
// from AWS, MinIO's webhook and versitygw, or versitygw's older bare
// array), a single record, the s3:TestEvent message, an SNS envelope
// (Notification or SubscriptionConfirmation), an SQS message or Lambda
// batch wrapping either, and EventBridge's "Object Created"/"Object
// Deleted" events. Anything else is ErrMalformed.
//
// It does not verify SNS signatures: bodies from the network go through
// an S3Decoder with an SNSVerifier.
func DecodeS3Notification(body []byte) (S3Notification, error) {
	return S3Decoder{}.Decode(context.Background(), body)
}

// S3Decoder decodes notifications like DecodeS3Notification. With SNS set,
// every SNS envelope met at any depth (an HTTP delivery, an SQS body, a
// Lambda record) must carry a valid signature, or decoding fails with
// ErrSNSSignature. Once the verifier lists topics, only notifications
// inside such a signed envelope are taken: a bare Records body, an SQS
// message or an EventBridge event carries no proof of who sent it, and the
// operator who lists topics has said where notifications come from.
// Without topics, formats that SNS did not wrap are decoded as before.
type S3Decoder struct {
	SNS *SNSVerifier
}

// Decode reads one notification body; ctx bounds certificate downloads.
func (d S3Decoder) Decode(ctx context.Context, body []byte) (S3Notification, error) {
	var n S3Notification
	if err := d.decodeS3(ctx, body, &n, 0, false); err != nil {
		return S3Notification{}, err
	}
	return n, nil
}

// verifySNS checks an SNS envelope when the decoder verifies.
func (d S3Decoder) verifySNS(ctx context.Context, p probe) error {
	if d.SNS == nil {
		return nil
	}
	return d.SNS.verify(ctx, p)
}

// probe holds an object's top-level fields by lower-cased name, so one
// lookup finds "Body" (SQS) and "body" (a Lambda SQS record) alike, and a
// field of an unexpected type (MinIO's "source" object) cannot fail it.
type probe map[string]json.RawMessage

func newProbe(raw []byte) (probe, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	p := make(probe, len(m))
	for k, v := range m {
		if _, dup := p[strings.ToLower(k)]; !dup {
			p[strings.ToLower(k)] = v
		}
	}
	return p, nil
}

// has says whether the field is present and not null.
func (p probe) has(k string) bool {
	v, ok := p[k]
	return ok && string(v) != "null"
}

// str is the field's value when it is a JSON string, else "".
func (p probe) str(k string) string {
	var s string
	if err := json.Unmarshal(p[k], &s); err != nil {
		return ""
	}
	return s
}

// signedOnly says whether records must come from a signed SNS envelope.
func (d S3Decoder) signedOnly() bool { return d.SNS != nil && len(d.SNS.Topics) > 0 }

// unsigned refuses what reached a record or test event outside a signed
// envelope, when only signed ones are taken.
func (d S3Decoder) unsigned(signed bool) error {
	if signed || !d.signedOnly() {
		return nil
	}
	return fmt.Errorf("%w: this receiver takes only notifications inside a signed SNS envelope from its listed topics (%s); an unsigned S3, SQS or EventBridge body is refused",
		ErrSNSSignature, strings.Join(d.SNS.Topics, ", "))
}

func (d S3Decoder) decodeS3(ctx context.Context, body []byte, n *S3Notification, depth int, signed bool) error {
	if depth >= maxEnvelopes {
		return Malformed("s3 notification nests more than %d envelopes", maxEnvelopes)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return Malformed("empty s3 notification")
	}
	if body[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			return Malformed("s3 notification: %v", err)
		}
		return d.decodeItems(ctx, items, n, depth, signed)
	}
	p, err := newProbe(body)
	if err != nil {
		return Malformed("s3 notification is not a JSON object: %v", err)
	}
	switch typ := p.str("type"); {
	case p.str("event") == "s3:TestEvent":
		if err := d.unsigned(signed); err != nil {
			return err
		}
		n.Test = true
		return nil
	case p.has("records"):
		var items []json.RawMessage
		if err := json.Unmarshal(p["records"], &items); err != nil {
			return Malformed("s3 notification Records: %v", err)
		}
		return d.decodeItems(ctx, items, n, depth, signed)
	case typ == "SubscriptionConfirmation":
		if n.SubscribeURL = p.str("subscribeurl"); n.SubscribeURL == "" {
			return Malformed("sns SubscriptionConfirmation without SubscribeURL")
		}
		n.TopicARN = p.str("topicarn")
		return d.verifySNS(ctx, p)
	case typ == "UnsubscribeConfirmation":
		n.TopicARN = p.str("topicarn")
		return d.verifySNS(ctx, p)
	case typ == "Notification" && p.has("message"):
		// Verify before reading the message: it is what the signature covers.
		if err := d.verifySNS(ctx, p); err != nil {
			return err
		}
		n.TopicARN = p.str("topicarn")
		// Only a verifier makes the message signed: without one the
		// signature was not checked.
		return d.decodeS3(ctx, []byte(p.str("message")), n, depth+1, d.SNS != nil)
	case p.has("body"):
		return d.decodeS3(ctx, []byte(p.str("body")), n, depth+1, signed)
	case p.has("detail-type") && p.str("source") == "aws.s3":
		r, ok, err := eventBridgeRecord(body, p.str("detail-type"))
		if err != nil || !ok {
			return err
		}
		if err := d.unsigned(signed); err != nil {
			return err
		}
		n.Records = append(n.Records, r)
		return nil
	case p.has("s3"):
		r, err := awsRecord(body)
		if err != nil {
			return err
		}
		if err := d.unsigned(signed); err != nil {
			return err
		}
		n.Records = append(n.Records, r)
		return nil
	}
	return Malformed("not an s3 notification: no Records, s3:TestEvent, SNS, SQS or EventBridge fields")
}

// decodeItems reads the elements of a Records array: S3 records, or the
// SQS and SNS records of a Lambda batch that wrap S3 messages.
func (d S3Decoder) decodeItems(ctx context.Context, items []json.RawMessage, n *S3Notification, depth int, signed bool) error {
	for i, it := range items {
		p, err := newProbe(it)
		if err != nil {
			return Malformed("s3 notification record %d: %v", i, err)
		}
		switch {
		case p.has("s3"):
			r, err := awsRecord(it)
			if err != nil {
				return err
			}
			if err := d.unsigned(signed); err != nil {
				return err
			}
			n.Records = append(n.Records, r)
		case p.has("body"):
			if err := d.decodeS3(ctx, []byte(p.str("body")), n, depth+1, signed); err != nil {
				return err
			}
		case p.has("sns"):
			if err := d.decodeS3(ctx, p["sns"], n, depth+1, signed); err != nil {
				return err
			}
		default:
			return Malformed("s3 notification record %d has neither s3, body nor Sns", i)
		}
	}
	return nil
}

type awsS3Record struct {
	EventSource string `json:"eventSource"`
	AWSRegion   string `json:"awsRegion"`
	EventTime   string `json:"eventTime"`
	EventName   string `json:"eventName"`
	S3          *struct {
		ConfigurationID string `json:"configurationId"`
		Bucket          struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key       string          `json:"key"`
			Size      json.RawMessage `json:"size"`
			ETag      *string         `json:"eTag"`
			VersionID *string         `json:"versionId"`
			Sequencer string          `json:"sequencer"`
		} `json:"object"`
	} `json:"s3"`
}

// awsRecord reads one record of the S3 message format.
func awsRecord(raw []byte) (S3Record, error) {
	var a awsS3Record
	if err := json.Unmarshal(raw, &a); err != nil {
		return S3Record{}, Malformed("s3 record: %v", err)
	}
	if a.S3 == nil || a.S3.Bucket.Name == "" || a.S3.Object.Key == "" || a.EventName == "" {
		return S3Record{}, Malformed("s3 record lacks eventName, s3.bucket.name or s3.object.key")
	}
	key := a.S3.Object.Key
	// AWS form-encodes keys ("red+flower.jpg") and MinIO query-escapes them
	// ("a%2Fb"); versitygw sends them as stored.
	if !versitygwConfigurations[a.S3.ConfigurationID] {
		var err error
		if key, err = url.QueryUnescape(key); err != nil {
			return S3Record{}, Malformed("s3 record key %q is not URL-encoded: %v", a.S3.Object.Key, err)
		}
	}
	size, err := sizeOf(a.S3.Object.Size)
	if err != nil {
		return S3Record{}, err
	}
	return S3Record{
		Bucket: a.S3.Bucket.Name, Key: key, EventName: strings.TrimPrefix(a.EventName, "s3:"),
		Size: size, ETag: deref(a.S3.Object.ETag), VersionID: deref(a.S3.Object.VersionID), Sequencer: a.S3.Object.Sequencer,
		Time: parseTime(a.EventTime), Source: a.EventSource, Region: a.AWSRegion,
	}, nil
}

type eventBridgeEvent struct {
	Time   string `json:"time"`
	Region string `json:"region"`
	Detail *struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key       string          `json:"key"`
			Size      json.RawMessage `json:"size"`
			ETag      string          `json:"etag"`
			VersionID string          `json:"version-id"`
			Sequencer string          `json:"sequencer"`
		} `json:"object"`
		Reason       string `json:"reason"`
		DeletionType string `json:"deletion-type"`
	} `json:"detail"`
}

// eventBridgeCreated maps the reasons of "Object Created" to the event
// names of the notification format.
var eventBridgeCreated = map[string]string{
	"PutObject": "Put", "POST Object": "Post", "CopyObject": "Copy", "CompleteMultipartUpload": "CompleteMultipartUpload",
}

// eventBridgeRecord reads an EventBridge S3 event. ok is false for detail
// types that are not about an object's content (tags, ACLs, restores):
// they decode to no record.
func eventBridgeRecord(raw []byte, detailType string) (S3Record, bool, error) {
	var e eventBridgeEvent
	if err := json.Unmarshal(raw, &e); err != nil {
		return S3Record{}, false, Malformed("eventbridge s3 event: %v", err)
	}
	if e.Detail == nil || e.Detail.Bucket.Name == "" || e.Detail.Object.Key == "" {
		return S3Record{}, false, Malformed("eventbridge s3 event lacks detail.bucket.name or detail.object.key")
	}
	var name string
	switch detailType {
	case "Object Created":
		name = "ObjectCreated:" + eventBridgeCreated[e.Detail.Reason]
		if eventBridgeCreated[e.Detail.Reason] == "" {
			name = "ObjectCreated:Put"
		}
	case "Object Deleted":
		switch {
		case e.Detail.Reason == "Lifecycle Expiration":
			name = "LifecycleExpiration:Delete"
			if e.Detail.DeletionType == "Delete Marker Created" {
				name = "LifecycleExpiration:DeleteMarkerCreated"
			}
		case e.Detail.DeletionType == "Delete Marker Created":
			name = "ObjectRemoved:DeleteMarkerCreated"
		default:
			name = "ObjectRemoved:Delete"
		}
	default:
		return S3Record{}, false, nil
	}
	// EventBridge keys are URL-encoded like the notification format's.
	key, err := url.QueryUnescape(e.Detail.Object.Key)
	if err != nil {
		return S3Record{}, false, Malformed("eventbridge s3 key %q is not URL-encoded: %v", e.Detail.Object.Key, err)
	}
	size, err := sizeOf(e.Detail.Object.Size)
	if err != nil {
		return S3Record{}, false, err
	}
	return S3Record{Bucket: e.Detail.Bucket.Name, Key: key, EventName: name, Size: size, ETag: e.Detail.Object.ETag,
		VersionID: e.Detail.Object.VersionID, Sequencer: e.Detail.Object.Sequencer, Time: parseTime(e.Time),
		Source: "aws.s3", Region: e.Region}, true, nil
}

// sizeOf accepts a number, a numeric string or nothing (MinIO omits the
// size of removals).
func sizeOf(raw json.RawMessage) (int64, error) {
	s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
	if s == "" || s == "null" {
		return 0, nil
	}
	var n int64
	if err := json.Unmarshal([]byte(s), &n); err != nil || n < 0 {
		return 0, Malformed("s3 object size %s is not a non-negative integer", raw)
	}
	return n, nil
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// DecodeS3Event reads the S3 notification a CloudEvent carries: the
// S3Record `snapflow source s3` sends, or, for the AWS and TriggerMesh
// adapter types, the S3 message or record in any DecodeS3Notification
// format. Like DecodeS3Notification it verifies no SNS signature.
func DecodeS3Event(e event.Event) (S3Notification, error) {
	return S3Decoder{}.DecodeEvent(context.Background(), e)
}

// DecodeEvent is DecodeS3Event with the decoder's SNS verification for
// the adapter types, whose data may be an SNS envelope (SNS to SQS
// without raw delivery). The S3Record of `snapflow source s3` has none: the
// source verified it.
func (d S3Decoder) DecodeEvent(ctx context.Context, e event.Event) (S3Notification, error) {
	if !IsS3Notification(e.Type()) {
		return S3Notification{}, Malformed("type %q is not an s3 notification type", e.Type())
	}
	if strings.HasSuffix(strings.ToLower(e.Type()), "testevent") {
		return S3Notification{Test: true}, nil
	}
	if len(e.Data()) == 0 {
		return S3Notification{}, Malformed("%s event %s has no data", e.Type(), e.ID())
	}
	if e.Type() != S3ObjectNotification {
		n, err := d.Decode(ctx, e.Data())
		if err != nil {
			return S3Notification{}, fmt.Errorf("%s event %s: %w", e.Type(), e.ID(), err)
		}
		return n, nil
	}
	var r S3Record
	dec := json.NewDecoder(bytes.NewReader(e.Data()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return S3Notification{}, Malformed("%s data of event %s: %v", S3ObjectNotification, e.ID(), err)
	}
	if r.Bucket == "" || r.Key == "" || r.EventName == "" {
		return S3Notification{}, Malformed("%s data of event %s lacks bucket, key or eventName", S3ObjectNotification, e.ID())
	}
	return S3Notification{Records: []S3Record{r}}, nil
}
