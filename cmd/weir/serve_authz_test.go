package main

import (
	"slices"
	"strings"
	"testing"
)

func TestServeSecurityFlags(t *testing.T) {
	o := &serveOptions{}
	cmd := newServeCmdFor(o)
	if err := cmd.ParseFlags([]string{"--data-dir", "/d", "--authorizer", "acl", "--super-users", "User:admin,User:ops",
		"--allow-everyone-if-no-acl-found"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.brokerConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Authorizer != "acl" || !slices.Equal(cfg.SuperUsers, []string{"User:admin", "User:ops"}) || !cfg.AllowEveryoneIfNoACLFound {
		t.Fatalf("security config: %q %q %v", cfg.Authorizer, cfg.SuperUsers, cfg.AllowEveryoneIfNoACLFound)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--authorizer", "ranger"}},
		{[]string{"--authorizer", "acl", "--super-users", "admin"}},
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--kafka-addr", "127.0.0.1:0", "--http-addr", ""}, tc.args...)
		_, errOut, code := runCLI(t, "", args...)
		if code == 0 || (!strings.Contains(errOut, "authorizer") && !strings.Contains(errOut, "super user")) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errOut)
		}
	}
}
