package cli

import (
	"errors"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/snapflow/snapflow/events"
	s3source "github.com/snapflow/snapflow/events/sources/s3"
)

const sourceS3Long = `s3 accepts S3 bucket notifications over plain HTTP and forwards each
object record as a ` + events.S3ObjectNotification + ` CloudEvent to every --sink
(one per function, or a broker), for clusters without Knative's own sources.

It understands what S3 servers POST to a webhook: the AWS notification
message, MinIO's webhook body, versitygw's --event-webhook-url body, an SNS
HTTP(S) subscription (Notification, and SubscriptionConfirmation: with
--confirm-sns-subscriptions it visits the SubscribeURL of an SNS host, else
it logs the URL for you to visit), SQS-wrapped messages and EventBridge
S3 events. s3:TestEvent is acknowledged without forwarding.

SNS envelopes must carry a valid SNS signature (--sns-verify, on by
default): the signing certificate is fetched over HTTPS from
sns.<region>.amazonaws.com only. A valid signature proves only that some
SNS topic sent the message, so the envelope's TopicArn must also be one
listed with --sns-topic-arn; with none listed every SNS envelope is
refused. A Timestamp older than --sns-max-age (a replayed capture) or
ahead of this clock is refused too. An unsigned or forged envelope, an
unknown SignatureVersion, a certificate on another host, a topic not
listed or a stale message gets 403 naming why.
Other formats (webhooks, SNS raw message delivery) carry no signature, and
the endpoint does not authenticate their senders: expose it only to the
S3 server and SNS.

A body that is not a notification gets 400. When a sink cannot be reached
after a few retries, or the SNS certificate cannot be downloaded, the
request gets 502, so a sender that retries (SNS) delivers again; versitygw
does not retry, and the functions' periodic resync catches up with what
was lost.`

func newSourceS3Cmd() *cobra.Command {
	var addr string
	var sinks, buckets, topics []string
	var confirmSNS, snsVerify, devLogs bool
	var tokenFile string
	var snsMaxAge time.Duration
	cmd := &cobra.Command{
		Use:   "s3 --sink URL [--sink URL...]",
		Short: "Receive S3 bucket notifications over HTTP and POST one CloudEvent per object record to the sinks",
		Long:  sourceS3Long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(sinks) == 0 {
				return errors.New("--sink is required: the URL of a function or broker (repeat for several)")
			}
			log := zap.New(zap.UseDevMode(devLogs)).WithName("s3-source")
			ctrl.SetLogger(log)
			if !snsVerify {
				log.Info("SNS signature verification is off (--sns-verify=false): forged SNS envelopes are accepted")
			} else if len(topics) == 0 {
				log.Info("no --sns-topic-arn: SNS envelopes are refused; other notification formats are forwarded")
			}
			src, err := s3source.New(s3source.Options{Sinks: sinks, Buckets: buckets, ConfirmSNS: confirmSNS, VerifySNS: snsVerify, SNSTopics: topics, SNSMaxAge: snsMaxAge, TokenFile: tokenFile}, log)
			if err != nil {
				return err
			}
			return s3source.Serve(cmd.Context(), addr, src, log)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen address (loopback by default; a Deployment passes --addr=:8080)")
	cmd.Flags().StringArrayVar(&sinks, "sink", nil, "URL to POST CloudEvents to (repeatable)")
	cmd.Flags().StringArrayVar(&buckets, "bucket", nil, "forward only records of this bucket (repeatable; default all)")
	cmd.Flags().BoolVar(&confirmSNS, "confirm-sns-subscriptions", false, "confirm SNS subscriptions by visiting their SubscribeURL (SNS hosts only)")
	cmd.Flags().BoolVar(&snsVerify, "sns-verify", true, "refuse SNS envelopes without a valid SNS signature (certificates from sns.<region>.amazonaws.com over HTTPS)")
	cmd.Flags().StringArrayVar(&topics, "sns-topic-arn", nil, "accept SNS envelopes of this topic ARN (repeatable); once one is listed, only notifications inside a signed envelope are taken. With none, SNS envelopes are refused")
	cmd.Flags().DurationVar(&snsMaxAge, "sns-max-age", events.DefaultSNSMaxAge, "refuse signed SNS messages whose Timestamp is older than this (a replayed capture); raise it only for a delivery policy that retries longer")
	cmd.Flags().BoolVar(&devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", tokenFileHelp)
	return cmd
}
