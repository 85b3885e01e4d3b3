package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ShareGroupHeartbeat (KIP-932): served by the share coordinator; its
// Behavior list opens broker/share/group.go. A member joining a group ID
// that is a classic or consumer group: GROUP_ID_NOT_FOUND (shares.go).
func init() { regShareAPI(kmsg.ShareGroupHeartbeat, handleShareHeartbeat) }
