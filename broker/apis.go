package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The API keys this broker serves and the version range of each. A request
// outside its range closes the connection (ApiVersions answers it, KIP-511).
//
// Minimum versions follow what the storage can serve: Produce >= 3 and
// Fetch >= 4 carry RecordBatch v2, the only format the log stores (Kafka
// 4.0 dropped the older ones too). Maximums are what the handlers
// implement; the group keys come from the coordinator (see groups.go).

const (
	apiKeyProduce     int16 = 0
	apiKeyFetch       int16 = 1
	apiKeyApiVersions int16 = 18
)

type handlerFunc func(b *Broker, ctx context.Context, s *slot, req kmsg.Request) (kmsg.Response, error)

type api struct {
	key      int16
	min, max int16
	name     string
	handle   handlerFunc
}

// apiTable is immutable after package initialisation (built in init to
// break the cycle ApiVersions handler -> table).
var apiTable map[int16]api

func init() { apiTable = buildAPITable() }

func buildAPITable() map[int16]api {
	t := map[int16]api{}
	add := func(key, min, max int16, h handlerFunc) {
		t[key] = api{key: key, min: min, max: max, name: kmsg.NameForKey(key), handle: h}
	}
	add(apiKeyProduce, 3, 13, handleProduce)
	add(apiKeyFetch, 4, 18, handleFetch)
	add(2, 1, 10, handleListOffsets)
	add(3, 0, 13, handleMetadata)
	add(17, 0, 1, handleSASLHandshake)
	add(apiKeyApiVersions, 0, 4, handleApiVersions)
	add(19, 0, 7, handleCreateTopics)
	add(20, 0, 6, handleDeleteTopics)
	add(21, 0, 2, handleDeleteRecords)
	add(23, 0, 4, handleOffsetForLeaderEpoch)
	add(29, 0, 3, handleDescribeACLs)
	add(30, 0, 3, handleCreateACLs)
	add(31, 0, 3, handleDeleteACLs)
	add(32, 0, 4, handleDescribeConfigs)
	add(33, 0, 2, handleAlterConfigs)
	add(35, 0, 4, handleDescribeLogDirs)
	add(37, 0, 3, handleCreatePartitions)
	add(44, 0, 1, handleIncrementalAlterConfigs)
	add(60, 0, 1, handleDescribeCluster)
	add(61, 0, 0, handleDescribeProducers)
	return t
}

// api returns the served API for key: the transaction coordinator's keys
// (InitProducerId and the transaction APIs), the table above, or the group
// coordinator's keys.
func (b *Broker) api(key int16) (api, bool) {
	if a, ok := b.txnAPI(key); ok {
		return a, true // the transaction coordinator serves InitProducerId too
	}
	if a, ok := apiTable[key]; ok {
		return a, true
	}
	if b.groups != nil && slices.Contains(b.groups.APIKeys(), key) {
		if req := kmsg.RequestForKey(key); req != nil {
			return api{key: key, min: 0, max: req.MaxVersion(), name: kmsg.NameForKey(key), handle: handleGroup}, true
		}
	}
	return api{}, false
}

// apiVersionsKeys is the ApiVersions key list, sorted by key.
func (b *Broker) apiVersionsKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]int16, 0, len(apiTable)+16)
	for k := range apiTable {
		keys = append(keys, k)
	}
	if b.groups != nil {
		for _, k := range b.groups.APIKeys() {
			if _, dup := apiTable[k]; !dup && kmsg.RequestForKey(k) != nil {
				keys = append(keys, k)
			}
		}
	}
	if b.txns != nil {
		for _, k := range b.txns.APIVersions() {
			if !slices.Contains(keys, k.ApiKey) && kmsg.RequestForKey(k.ApiKey) != nil {
				keys = append(keys, k.ApiKey)
			}
		}
	}
	slices.Sort(keys)
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(keys))
	for _, k := range keys {
		a, _ := b.api(k)
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	return out
}
