package testcerts

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"testing"
)

// Issuer signs RS256 JWTs with a key generated at test time; its JWKS is
// written to JWKSFile.
type Issuer struct {
	Kid      string
	JWKSFile string
	key      *rsa.PrivateKey
	tb       testing.TB
}

// NewIssuer generates a key and writes its JWKS into dir (t.TempDir() if
// empty).
func NewIssuer(tb testing.TB, dir, kid string) *Issuer {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	b64 := base64.RawURLEncoding
	set, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64.EncodeToString(key.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	is := &Issuer{Kid: kid, JWKSFile: filepath.Join(dir, "jwks-"+kid+".json"), key: key, tb: tb}
	if err := os.WriteFile(is.JWKSFile, set, 0o600); err != nil {
		tb.Fatal(err)
	}
	return is
}

// Sign returns a compact RS256 JWT of claims.
func (is *Issuer) Sign(claims map[string]any) string {
	b64 := base64.RawURLEncoding
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": is.Kid, "typ": "JWT"})
	body, _ := json.Marshal(claims)
	signed := b64.EncodeToString(hdr) + "." + b64.EncodeToString(body)
	d := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, is.key, crypto.SHA256, d[:])
	if err != nil {
		is.tb.Fatal(err)
	}
	return signed + "." + b64.EncodeToString(sig)
}
