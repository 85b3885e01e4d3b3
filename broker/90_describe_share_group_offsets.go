package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeShareGroupOffsets (KIP-932): served by the share coordinator
// (broker/share/admin.go): start offset and lag per share-partition.
func init() { regShareAPI(kmsg.DescribeShareGroupOffsets, handleShare) }
