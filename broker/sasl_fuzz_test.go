package broker

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/auth"
)

// FuzzSASLConnection feeds arbitrary bytes to a connection of a SASL
// listener: SASL frames in and out of order, raw v0 tokens, requests
// before authentication. The broker must never panic, and the connection
// ends either unauthenticated or as the one user whose password is in the
// seeds.
func FuzzSASLConnection(f *testing.F) {
	b, _ := testBroker(f)
	cred, err := auth.NewScramCredentialFromPassword(auth.ScramSHA256, "fz-pass", auth.MinIterations)
	if err != nil {
		f.Fatal(err)
	}
	if err := b.scram.apply([]scramChange{{User: "fz", Mechanism: auth.ScramSHA256, Cred: &cred}}); err != nil {
		f.Fatal(err)
	}
	b.cfg.SASL.FailedAuthDelay = -1
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	token := func(t string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(t))), t...) }
	f.Add(cat(frame(handshake(1, "PLAIN"), 1), frame(authenticate(1, []byte("\x00fz\x00fz-pass")), 2), frame(kmsg.NewPtrMetadataRequest(), 3)))
	f.Add(cat(frame(handshake(0, "PLAIN"), 1), token("\x00fz\x00fz-pass"), frame(kmsg.NewPtrMetadataRequest(), 2)))
	f.Add(cat(frame(handshake(1, "SCRAM-SHA-256"), 1), frame(authenticate(2, []byte("n,,n=fz,r=abcdef")), 2),
		frame(authenticate(2, []byte("c=biws,r=abcdef,p=AAAA")), 3)))
	f.Add(cat(frame(handshake(0, "SCRAM-SHA-256"), 1), token("n,,n=fz,r=x"), token("c=biws,r=x,p=AA==")))
	f.Add(cat(frame(authenticate(0, []byte("x")), 1)))
	f.Add(cat(frame(kmsg.NewPtrApiVersionsRequest(), 1), frame(kmsg.NewPtrMetadataRequest(), 2)))
	f.Add(cat(frame(handshake(1, "OAUTHBEARER"), 1), frame(authenticate(1, []byte("n,,\x01auth=Bearer a.b.c\x01\x01")), 2)))
	f.Fuzz(func(t *testing.T, input []byte) {
		mc := &memConn{in: bytes.NewReader(input)}
		c := newConn(b, mc)
		c.sasl = &saslConn{}
		c.serve()
		if n := b.panics.Load(); n != 0 {
			t.Fatalf("%d panics", n)
		}
		if c.principal != anonymous && c.principal != "User:fz" {
			t.Fatalf("principal %q", c.principal)
		}
		if c.principal == "User:fz" && !bytes.Contains(input, []byte("fz-pass")) && !bytes.Contains(input, []byte("p=")) {
			t.Fatalf("authenticated without the password")
		}
	})
}
