package kapi

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type coord struct{ calls []string }

func (c *coord) heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	c.calls = append(c.calls, "heartbeat "+req.Group)
	return req.ResponseKind(), nil
}

func (c *coord) listGroups(_ context.Context, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	c.calls = append(c.calls, "list")
	return req.ResponseKind(), nil
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s: registered without a panic", what)
		}
	}()
	f()
}

func TestRegisterAndDispatch(t *testing.T) {
	var tab Table[*coord]
	Register(&tab, kmsg.ListGroups, 0, 5, (*coord).listGroups)
	Register(&tab, kmsg.Heartbeat, 1, 4, (*coord).heartbeat)

	want := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: int16(kmsg.Heartbeat), MinVersion: 1, MaxVersion: 4},
		{ApiKey: int16(kmsg.ListGroups), MinVersion: 0, MaxVersion: 5},
	}
	got := tab.Versions()
	if !slices.EqualFunc(got, want, func(a, b kmsg.ApiVersionsResponseApiKey) bool {
		return a.ApiKey == b.ApiKey && a.MinVersion == b.MinVersion && a.MaxVersion == b.MaxVersion
	}) {
		t.Fatalf("versions %+v, want %+v", got, want)
	}

	c := &coord{}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group = 4, "g"
	h, err := tab.Lookup(hb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h(c, t.Context(), hb); err != nil || !slices.Equal(c.calls, []string{"heartbeat g"}) {
		t.Fatalf("dispatch: %v, calls %v", err, c.calls)
	}

	for _, req := range []kmsg.Request{
		func() kmsg.Request { r := kmsg.NewPtrHeartbeatRequest(); r.Version = 0; return r }(), // below the range
		func() kmsg.Request { r := kmsg.NewPtrHeartbeatRequest(); r.Version = 5; return r }(), // above it
		kmsg.NewPtrMetadataRequest(), // not registered
	} {
		if _, err := tab.Lookup(req); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s v%d: %v, want ErrUnsupported", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
	}
}

func TestRegisterRefusesMistakes(t *testing.T) {
	var tab Table[*coord]
	Register(&tab, kmsg.ListGroups, 0, 5, (*coord).listGroups)
	mustPanic(t, "twice", func() { Register(&tab, kmsg.ListGroups, 0, 1, (*coord).listGroups) })
	mustPanic(t, "handler of another key", func() { Register(&tab, kmsg.JoinGroup, 0, 1, (*coord).heartbeat) })
	mustPanic(t, "max above kmsg", func() { Register(&tab, kmsg.Heartbeat, 0, 1000, (*coord).heartbeat) })
	mustPanic(t, "min above max", func() { Register(&tab, kmsg.Heartbeat, 3, 2, (*coord).heartbeat) })
	mustPanic(t, "negative min", func() { Register(&tab, kmsg.Heartbeat, -1, 2, (*coord).heartbeat) })
	if err := CheckRange(kmsg.Key(-3), 0, 0); err == nil {
		t.Fatal("unknown key accepted")
	}
}
