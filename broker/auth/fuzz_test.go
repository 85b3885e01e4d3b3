package auth

import (
	"errors"
	"testing"
)

// The decoders must never panic, and every error must be one of the two
// kinds the broker maps to Kafka codes.
func checkKind(t *testing.T, err error) {
	if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("error of neither kind: %v", err)
	}
}

func FuzzScramClientFirst(f *testing.F) {
	for _, s := range []string{"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "y,a=u,n=u,r=x,ext=1", "n,,n=a=2Cb,r=x", "p=x,,n=a,r=b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		cf, err := ParseScramClientFirst(msg)
		checkKind(t, err)
		if err == nil && (cf.User == "" || cf.Nonce == "" || cf.GS2Header+cf.Bare != string(msg)) {
			t.Fatalf("accepted %q as %+v", msg, cf)
		}
	})
}

func FuzzScramClientFinal(f *testing.F) {
	for _, s := range []string{"c=biws,r=abc,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "c=biws,r=x,e=1,p=AAAA", "p=,c="} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, err := ParseScramClientFinal(msg)
		checkKind(t, err)
	})
}

// A whole server exchange fed arbitrary client messages: no panic, never
// authenticated without the password.
func FuzzScramSession(f *testing.F) {
	creds := newCreds(f, "user", "pencil", ScramSHA256)
	f.Add([]byte("n,,n=user,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, _ := NewScramSession(ScramSHA256, creds, []byte("k"))
		_, _, err := s.Step(first)
		checkKind(t, err)
		if err != nil {
			return
		}
		_, done, err := s.Step(final)
		checkKind(t, err)
		if done {
			t.Fatalf("authenticated with a fuzzed proof: %q %q", first, final)
		}
	})
}

func FuzzPlainAndOAuth(f *testing.F) {
	f.Add([]byte("\x00alice\x00pw"))
	f.Add([]byte("n,,\x01auth=Bearer a.b.c\x01\x01"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, _, err := ParsePlain(msg)
		checkKind(t, err)
		_, _, err = ParseOAuthBearer(msg)
		checkKind(t, err)
		_, err = ValidateJWT(JWTConfig{Keys: &JWKS{}}, string(msg))
		checkKind(t, err)
	})
}
