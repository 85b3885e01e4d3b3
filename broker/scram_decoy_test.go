package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/broker/auth"
)

// An unknown SCRAM user's decoy salt is the same after a restart (the key
// is kept in the data directory), so probes before and after a restart do
// not tell unknown names from users; another data directory has another.
func TestScramDecoySaltSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	salt := func(b *Broker) string {
		t.Helper()
		s, err := b.newSASLSession(auth.ScramSHA512)
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := s.Step([]byte("n,,n=nobody,r=probe"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(string(r), ",")[1]
	}
	b, cfg := testBroker(t, func(c *Config) { c.DataDir = dir })
	first := salt(b)
	if again := salt(b); again != first {
		t.Fatalf("the same name got salts %s and %s", first, again)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b2, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if after := salt(b2); after != first {
		t.Fatalf("after a restart the decoy salt is %s, was %s", after, first)
	}
	other, _ := testBroker(t)
	if s := salt(other); s == first {
		t.Fatalf("two data directories share the decoy salt %s", s)
	}
}
