package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// AlterShareGroupOffsets (KIP-932): served by the share coordinator
// (broker/share/admin.go): sets start offsets of an empty share group.
func init() { regShareAPI(kmsg.AlterShareGroupOffsets, handleShare) }
