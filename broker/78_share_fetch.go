package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ShareFetch (KIP-932): served by the share coordinator; its Behavior list
// opens broker/share/fetch.go (share sessions, acknowledgements,
// acquisition locks, delivery counts, long poll).
func init() { regShareAPI(kmsg.ShareFetch, handleShare) }
