package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ShareGroupDescribe (KIP-932): served by the share coordinator
// (broker/share/group.go): each group's state, epochs, members with their
// subscriptions and assignments; GROUP_ID_NOT_FOUND for a group that is
// not a share group.
func init() { regShareAPI(kmsg.ShareGroupDescribe, handleShare) }
