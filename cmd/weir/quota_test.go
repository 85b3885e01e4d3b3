package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weirhq/weir/weirtest"
)

func TestQuotaCommands(t *testing.T) {
	b := weirtest.Start(t)
	bs := "--brokers=" + b.Addr()
	mustCLI(t, "", "quota", "set", bs, "--user", "alice", "--producer-byte-rate", "1048576", "--request-percentage", "25")
	mustCLI(t, "", "quota", "set", bs, "--default-user", "--consumer-byte-rate", "2048")
	mustCLI(t, "", "quota", "set", bs, "--user", "alice", "--client-id", "etl", "--consumer-byte-rate", "4096")

	text := mustCLI(t, "", "quota", "list", bs)
	for _, want := range []string{"user=alice", "producer_byte_rate", "1048576", "request_percentage", "25", "user=<default>", "2048", "client-id=etl"} {
		if !strings.Contains(text, want) {
			t.Fatalf("list lacks %q:\n%s", want, text)
		}
	}
	var got []quotaJSON
	if err := json.Unmarshal([]byte(mustCLI(t, "", "quota", "list", bs, "--default-user", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Values["consumer_byte_rate"] != 2048 || got[0].Entity["user"] != nil {
		t.Fatalf("default user: %+v", got)
	}

	// Bad input is refused with the broker's reason, nothing changes.
	if _, errOut, code := runCLI(t, "", "quota", "set", bs, "--user", "bob", "--producer-byte-rate", "1.5"); code == 0 || !strings.Contains(errOut, "INVALID_REQUEST") {
		t.Fatalf("fractional byte rate: exit %d, %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "", "quota", "set", bs, "--producer-byte-rate", "10"); code == 0 || !strings.Contains(errOut, "give an entity") {
		t.Fatalf("no entity: exit %d, %s", code, errOut)
	}

	mustCLI(t, "", "quota", "remove", bs, "--user", "alice", "--key", "request-percentage")
	if err := json.Unmarshal([]byte(mustCLI(t, "", "quota", "list", bs, "--user", "alice", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	// user=alice and user=alice,client-id=etl match --user alice.
	for _, q := range got {
		if _, ok := q.Values["request_percentage"]; ok {
			t.Fatalf("request_percentage still set: %+v", got)
		}
	}
	mustCLI(t, "", "quota", "remove", bs, "--user", "alice")
	mustCLI(t, "", "quota", "remove", bs, "--user", "alice", "--client-id", "etl")
	if err := json.Unmarshal([]byte(mustCLI(t, "", "quota", "list", bs, "-o", "json")), &got); err != nil || len(got) != 1 {
		t.Fatalf("after removes: %+v %v", got, err)
	}
}
