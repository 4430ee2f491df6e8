package s3store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/snapflow/snapflow/internal/prune"
)

// contentMD5Only swaps the flexible checksum of one operation for
// Content-MD5. Setting ChecksumAlgorithm=MD5 fails on the client ("unknown
// checksum algorithm"), and servers such as older MinIO reject the CRC32
// default, so the SDK's checksum middleware is removed and a plain
// Content-MD5 computed instead. Absent middleware is fine: the goal is
// only that none of it runs.
func contentMD5Only(stack *middleware.Stack) error {
	_, _ = stack.Initialize.Remove("AWSChecksum:SetupInputContext")
	_, _ = stack.Finalize.Remove("AWSChecksum:ComputeInputPayloadChecksum")
	_, _ = stack.Finalize.Remove("addInputChecksumTrailer")
	return smithyhttp.AddContentChecksumMiddleware(stack)
}

// DeleteObjects sends one Multi-Object Delete with Quiet=false and
// returns the per-key outcome for prune.TallyBatch. Each target is sent as
// Key, plus VersionId when set. At most prune.MaxDeleteBatch targets
// are accepted, so a caller bug can never exceed the S3 limit.
func (s *Store) DeleteObjects(ctx context.Context, batch []prune.DeleteTarget) ([]prune.DeleteTarget, []prune.DeleteFailure, error) {
	if len(batch) == 0 {
		return nil, nil, nil
	}
	if len(batch) > prune.MaxDeleteBatch {
		return nil, nil, fmt.Errorf("delete batch of %d objects exceeds the limit of %d", len(batch), prune.MaxDeleteBatch)
	}
	ids := make([]types.ObjectIdentifier, len(batch))
	for i, t := range batch {
		ids[i] = types.ObjectIdentifier{Key: aws.String(t.Key)}
		if t.VersionID != "" {
			ids[i].VersionId = aws.String(t.VersionID)
		}
	}
	in := &s3.DeleteObjectsInput{Bucket: aws.String(s.bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(false)}}
	out, err := s.cli.DeleteObjects(ctx, in, func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, contentMD5Only)
	})
	s.n.deletes.Add(1)
	if err != nil {
		return nil, nil, fmt.Errorf("delete %d objects from bucket %s: %w", len(batch), s.bucket, err)
	}
	deleted := make([]prune.DeleteTarget, 0, len(out.Deleted))
	for _, d := range out.Deleted {
		deleted = append(deleted, prune.DeleteTarget{Key: aws.ToString(d.Key), VersionID: aws.ToString(d.VersionId)})
	}
	var failed []prune.DeleteFailure
	for _, e := range out.Errors {
		failed = append(failed, prune.DeleteFailure{Key: aws.ToString(e.Key), VersionID: aws.ToString(e.VersionId),
			Code: aws.ToString(e.Code), Message: aws.ToString(e.Message)})
	}
	if len(deleted) == 0 && len(failed) == 0 {
		// Some compatible servers answer an empty DeleteResult.
		s.n.deleted.Add(int64(len(batch)))
	} else {
		s.n.deleted.Add(int64(len(deleted)))
	}
	return deleted, failed, nil
}
