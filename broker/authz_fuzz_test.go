package broker

import (
	"encoding/binary"
	"testing"

	"github.com/weirhq/weir/broker/authz"
	"github.com/weirhq/weir/broker/quota"
	"github.com/weirhq/weir/vfs"
)

// FuzzAuthzRules decodes arbitrary bodies as every API's request at every
// served version and runs its authorization rule, then the merge on the
// empty response: neither may panic, and a refusal answers with the API's
// own response type.
func FuzzAuthzRules(f *testing.F) {
	for _, a := range apiByKey {
		if a == nil {
			continue
		}
		req := a.key.Request()
		req.SetVersion(a.max)
		f.Add(uint8(a.key), a.max, req.AppendTo(nil))
	}
	for k, cases := range matrixCases() {
		for _, c := range cases {
			r := c.req()
			f.Add(uint8(k), r.GetVersion(), r.AppendTo(nil))
		}
	}
	b, _ := aclBroker(f)
	if _, err := b.authz.Create([]authz.Binding{
		{ResourceType: authz.ResourceTopic, ResourceName: "t", PatternType: authz.PatternPrefixed, Principal: "User:fz", Host: "*", Operation: authz.OpDescribe, Permission: authz.PermAllow},
		{ResourceType: authz.ResourceGroup, ResourceName: "g", PatternType: authz.PatternLiteral, Principal: "User:fz", Host: "*", Operation: authz.OpRead, Permission: authz.PermAllow},
	}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key uint8, version int16, body []byte) {
		a := lookupAPI(int16(key))
		if a == nil || version < a.min || version > a.max {
			return
		}
		rule := authzRules[a.key]
		if rule.check == nil {
			return
		}
		req := a.key.Request()
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return
		}
		az := &azReq{b: b, principal: "User:fz", host: "127.0.0.1"}
		deny, merge := rule.check(az, req)
		if deny != nil {
			if deny.Key() != req.Key() || deny.GetVersion() != version {
				t.Fatalf("%s v%d refused with %T v%d", a.name, version, deny, deny.GetVersion())
			}
			deny.AppendTo(nil)
			return
		}
		if merge != nil {
			resp := req.ResponseKind()
			merge(resp)
			resp.AppendTo(nil)
		}
	})
}

// FuzzStoredSecurityFiles: arbitrary acls.json / quotas.json contents load
// or fail with an error; what loads is valid.
func FuzzStoredSecurityFiles(f *testing.F) {
	f.Add([]byte(`{"magic":"weir-acls","version":1,"acls":[{"resource_type":2,"resource_name":"t","pattern_type":3,"principal":"User:a","host":"*","operation":3,"permission":3}]}`))
	f.Add([]byte(`{"magic":"weir-quotas","version":1,"entries":[{"entity":[{"type":"user","name":"a"}],"values":{"producer_byte_rate":1024}}]}`))
	f.Add([]byte(`{"magic":"weir-quotas","version":1,"entries":[{"entity":[{"type":"user"},{"type":"user"}],"values":{"producer_byte_rate":-1}}]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewCrashableMem()
		if err := mem.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{authz.File, quota.File} {
			if err := vfs.WriteFileAtomic(mem, "/d/"+name, data); err != nil {
				t.Fatal(err)
			}
		}
		if a, err := authz.Open(authz.Options{FS: mem, Dir: "/d"}); err == nil {
			for _, bnd := range a.ACLs(authz.Filter{ResourceType: authz.ResourceAny, PatternType: authz.PatternAny, Operation: authz.OpAny, Permission: authz.PermAny}) {
				if err := bnd.Validate(); err != nil {
					t.Fatalf("loaded invalid ACL %v: %v", bnd, err)
				}
			}
		}
		if s, err := quota.Open(mem, "/d"); err == nil {
			ds, err := s.Describe(nil, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if _, err := d.Entity.Normalize(); err != nil {
					t.Fatalf("loaded invalid entity %v", d.Entity)
				}
				for k, v := range d.Values {
					if quota.ValidateValue(k, v) != nil {
						t.Fatalf("loaded invalid value %s=%v", k, v)
					}
				}
			}
		}
	})
}

// FuzzConnectionACL is FuzzConnection with the authorizer on: arbitrary
// bytes through a connection whose principal (ANONYMOUS) may do anything on
// topics prefixed "fz" and groups, and nothing else. Authorization rules
// and the handlers' answers meet here (refusals merged into real
// responses): no panic, and every response is a well-formed frame.
func FuzzConnectionACL(f *testing.F) {
	for k, cases := range matrixCases() {
		for i, c := range cases {
			r := c.req()
			f.Add(frame(r, int32(k)*16+int32(i)))
		}
	}
	f.Add(frame(produceReq(9, 1, "fz", 0, makeBatch(1, "a")), 1))
	f.Add(frame(produceReq(9, 0, "t", 0, makeBatch(1, "a")), 2))
	f.Add(frame(fetchReq(12, "fz", [16]byte{}, 0, 0, 0), 3))
	b, _ := aclBroker(f)
	b.topics.maxPartitions = 8
	if _, err := b.topics.create("fz", 1, nil, false); err != nil {
		f.Fatal(err)
	}
	if _, err := b.topics.create("t", 1, nil, false); err != nil {
		f.Fatal(err)
	}
	if _, err := b.authz.Create([]authz.Binding{
		{ResourceType: authz.ResourceTopic, ResourceName: "fz", PatternType: authz.PatternPrefixed, Principal: authz.Anonymous, Host: "*", Operation: authz.OpAll, Permission: authz.PermAllow},
		{ResourceType: authz.ResourceGroup, ResourceName: "*", PatternType: authz.PatternLiteral, Principal: authz.Anonymous, Host: "*", Operation: authz.OpAll, Permission: authz.PermAllow},
	}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		out := serveBytes(b, input)
		if n := b.panics.Load(); n != 0 {
			t.Fatalf("%d panics", n)
		}
		for r := out; len(r) > 0; {
			if len(r) < 8 {
				t.Fatalf("truncated response header: %d bytes", len(r))
			}
			size := int(binary.BigEndian.Uint32(r))
			if size < 4 || size > len(r)-4 {
				t.Fatalf("bad response size %d with %d left", size, len(r)-4)
			}
			r = r[4+size:]
		}
	})
}
