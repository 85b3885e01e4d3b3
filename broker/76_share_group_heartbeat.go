package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ShareGroupHeartbeat (KIP-932): served by the share coordinator; its
// Behavior list opens broker/share/group.go.
func init() { regShareAPI(kmsg.ShareGroupHeartbeat) }
