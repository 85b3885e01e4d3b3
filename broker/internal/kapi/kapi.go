// Package kapi is the registry habit of weir's Kafka API handlers (after
// kfake's regKey): every API registers, next to its handler's code and in
// an init function, its key, the version range the handler implements and
// the handler. The range is pinned by hand to what the code implements,
// never taken from kmsg's MaxVersion: a kmsg upgrade that knows newer
// versions must not make the broker advertise versions nobody implemented.
//
// The broker's own table (broker/apis.go) checks its ranges with
// CheckRange; the group and transaction coordinators keep a Table each and
// dispatch their requests through it.
package kapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUnsupported is wrapped by Table.Handle for a request whose key the
// table does not serve, or whose version is outside the key's range.
var ErrUnsupported = errors.New("unsupported request")

// CheckRange reports whether [min, max] is a valid range to serve key at:
// kmsg knows the key, and 0 <= min <= max <= the highest version kmsg
// encodes (a handler cannot implement a version the codec cannot read).
func CheckRange(key kmsg.Key, min, max int16) error {
	req := key.Request()
	if req == nil {
		return fmt.Errorf("kapi: unknown key %d", key)
	}
	if min < 0 || max < min || max > req.MaxVersion() {
		return fmt.Errorf("kapi: %s: bad version range %d-%d (kmsg encodes up to %d)", key.Name(), min, max, req.MaxVersion())
	}
	return nil
}

// Handler answers one request of its API. C is the coordinator type.
type Handler[C any] func(c C, ctx context.Context, req kmsg.Request) (kmsg.Response, error)

// API is one registered API.
type API[C any] struct {
	Key      kmsg.Key
	Min, Max int16
	Handle   Handler[C]
}

// Table is a set of registered APIs. It is filled by Register from init
// functions and read-only afterwards, so it needs no lock. The zero value
// is empty and ready.
type Table[C any] struct {
	byKey map[kmsg.Key]API[C]
}

// Register adds key's handler to t, for versions min..max. h receives the
// request as its concrete kmsg type R, which must be key's request type.
// It panics on a bad range, a mismatched R or a key registered twice: a
// registration mistake fails every test at package initialisation.
func Register[C any, R kmsg.Request](t *Table[C], key kmsg.Key, min, max int16, h func(c C, ctx context.Context, req R) (kmsg.Response, error)) {
	if err := CheckRange(key, min, max); err != nil {
		panic(err)
	}
	if _, ok := key.Request().(R); !ok {
		panic(fmt.Sprintf("kapi: %s registered with handler for %T", key.Name(), *new(R)))
	}
	if _, dup := t.byKey[key]; dup {
		panic(fmt.Sprintf("kapi: %s registered twice", key.Name()))
	}
	if t.byKey == nil {
		t.byKey = make(map[kmsg.Key]API[C])
	}
	t.byKey[key] = API[C]{Key: key, Min: min, Max: max, Handle: func(c C, ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		return h(c, ctx, req.(R))
	}}
}

// Lookup returns the handler of req. A key t does not serve, or a version
// outside the registered range, is an error wrapping ErrUnsupported (the
// broker never sends one: it checks the same ranges first).
func (t *Table[C]) Lookup(req kmsg.Request) (Handler[C], error) {
	key := kmsg.Key(req.Key())
	a, ok := t.byKey[key]
	if !ok {
		return nil, fmt.Errorf("%w: key %d (%s)", ErrUnsupported, req.Key(), key.Name())
	}
	if v := req.GetVersion(); v < a.Min || v > a.Max {
		return nil, fmt.Errorf("%w: %s v%d (served: v%d-%d)", ErrUnsupported, key.Name(), v, a.Min, a.Max)
	}
	return a.Handle, nil
}

// Versions lists the registered keys and ranges, sorted by key.
func (t *Table[C]) Versions() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(t.byKey))
	for _, a := range t.byKey {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(a.Key), MinVersion: a.Min, MaxVersion: a.Max})
	}
	slices.SortFunc(out, func(a, b kmsg.ApiVersionsResponseApiKey) int { return cmp.Compare(a.ApiKey, b.ApiKey) })
	return out
}
