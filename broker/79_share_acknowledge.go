package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ShareAcknowledge (KIP-932): served by the share coordinator
// (broker/share/fetch.go).
func init() { regShareAPI(kmsg.ShareAcknowledge, handleShare) }
