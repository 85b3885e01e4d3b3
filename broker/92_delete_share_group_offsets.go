package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DeleteShareGroupOffsets (KIP-932): served by the share coordinator
// (broker/share/admin.go): deletes an empty share group's state of topics.
func init() { regShareAPI(kmsg.DeleteShareGroupOffsets, handleShare) }
