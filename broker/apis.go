package broker

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/kapi"
)

// The API table. Every Kafka API the broker serves registers itself next
// to its code, in an init function (kfake's habit):
//
//	func init() { regAPI(api{key: kmsg.ListOffsets, min: 1, max: 10, handle: handleListOffsets}) }
//
// in the NN_name.go file of its handler; the group and transaction
// coordinators' APIs are registered by groups.go and txns.go, from the
// ranges those packages register next to their handlers. The table is the
// only list: ApiVersions advertises it, the connection refuses a version
// outside it, and what a connection does differently for an API (ordering
// a connection's requests, pooled request frames, the ApiVersions
// downgrade, writev of record sets) is a field of its registration, so
// conn.go names no API.
//
// Ranges are pinned to what the handler implements, never kmsg's
// MaxVersion; TestApiVersionsGolden (testdata/apiversions.golden) fails
// when an advertised range changes. Minimum versions follow what the
// storage can serve: Produce >= 3 and Fetch >= 4 carry RecordBatch v2,
// the only format the log stores (Kafka 4.0 dropped the older ones too).

type handlerFunc func(b *Broker, ctx context.Context, s *slot, req kmsg.Request) (kmsg.Response, error)

// handleCall is a request bound to its handler, ready to run on the
// request's goroutine.
type handleCall func(ctx context.Context) (kmsg.Response, error)

// orderFunc runs on the connection's read loop, which sees the requests in
// the order they were sent, before the request's goroutine starts. It
// links the request behind the earlier requests of the connection it must
// follow (order.go) and returns what the goroutine runs in place of next.
// It must not block.
type orderFunc func(c *conn, s *slot, req kmsg.Request, next handleCall) handleCall

// vectoredFunc frames resp as buffers for writev without copying its
// large byte fields, or returns ok false (the caller then encodes resp
// plainly into buf). buf is scratch space the buffers may reference.
type vectoredFunc func(sw *spliceWriter, buf []byte, corr int32, resp kmsg.Response) (bufs net.Buffers, scratch []byte, ok bool)

// api is one served Kafka API.
type api struct {
	key      kmsg.Key
	min, max int16 // the versions the handler implements
	name     string
	handle   handlerFunc

	// order, if set, orders the API's requests within a connection
	// beyond "answered in request order" (which holds for every API).
	order orderFunc
	// pooledFrame: large requests are read into frames of the broker's
	// frame pool (framepool.go); the handler calls s.frameDone once it no
	// longer reads the frame, else it is returned after the response.
	pooledFrame bool
	// unsupportedVersion, if set, answers a request of a version outside
	// min..max instead of closing the connection (ApiVersions, KIP-511).
	unsupportedVersion func(b *Broker) kmsg.Response
	// responseHeaderV0: the response never carries the flexible header's
	// tagged fields, whatever its version (ApiVersions: the client cannot
	// know yet which versions we speak).
	responseHeaderV0 bool
	// vectored, if set, writes the response with writev (splice.go).
	vectored vectoredFunc
}

// apiByKey is indexed by API key; nil for a key not served. It is filled
// by init functions only and read-only afterwards.
var apiByKey []*api

// regAPI adds a to the table. It panics (at package initialisation, so
// every test fails) on a range kmsg cannot encode or a key registered
// twice.
func regAPI(a api) {
	if err := kapi.CheckRange(a.key, a.min, a.max); err != nil {
		panic(err)
	}
	if a.handle == nil {
		panic(fmt.Sprintf("broker: %s registered without a handler", a.key.Name()))
	}
	k := int(a.key)
	for len(apiByKey) <= k {
		apiByKey = append(apiByKey, nil)
	}
	if apiByKey[k] != nil {
		panic(fmt.Sprintf("broker: %s registered twice", a.key.Name()))
	}
	a.name = a.key.Name()
	apiByKey[k] = &a
}

// lookupAPI returns the served API of key, or nil.
func lookupAPI(key int16) *api {
	if key < 0 || int(key) >= len(apiByKey) {
		return nil
	}
	return apiByKey[key]
}

// advertisedAPIs is the ApiVersions key list, sorted by key.
var advertisedAPIs = sync.OnceValue(func() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, a := range apiByKey {
		if a != nil {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(a.key), MinVersion: a.min, MaxVersion: a.max})
		}
	}
	return out
})

// apiVersionsKeys returns a copy of the ApiVersions key list (a response
// owns its slices).
func apiVersionsKeys() []kmsg.ApiVersionsResponseApiKey {
	return append([]kmsg.ApiVersionsResponseApiKey(nil), advertisedAPIs()...)
}
