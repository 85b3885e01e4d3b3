package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

// JWT validation (RFC 7519) for OAUTHBEARER: a compact JWS (RFC 7515)
// signed with RS256/384/512, PS256/384/512, ES256/384/512 or EdDSA by a key
// of the JWKS (RFC 7517) the broker is configured with, chosen by the
// token's "kid" (or the only key, if the JWKS has one and the token names
// none). "none" and HMAC algorithms are refused: the broker holds public
// keys only. Required claims: exp (in the future, within the clock skew),
// the principal claim; checked when configured: iss, aud; checked when
// present: nbf, iat.

// JWTConfig configures token validation.
type JWTConfig struct {
	Keys           KeySource
	Issuer         string        // required "iss" when not empty
	Audience       string        // must be in "aud" when not empty
	PrincipalClaim string        // default "sub"
	ClockSkew      time.Duration // default 30s
	Now            func() time.Time
	// AllowUnsecured accepts unsecured JWTs ("alg":"none", empty
	// signature; RFC 7519 section 6) besides signed ones: what Kafka's
	// default OAUTHBEARER validator does, for tests and development
	// only. Claims are checked all the same.
	AllowUnsecured bool
}

// KeySource returns the verification key of a kid. Implementations are
// safe for concurrent use.
type KeySource interface {
	Key(kid string) (crypto.PublicKey, error)
}

// Token is a validated JWT.
type Token struct {
	Principal string // "User:<principal claim>"
	Expiry    time.Time
}

// ValidateJWT checks the signature and claims of a compact JWT. The error
// says why it is invalid without quoting the token.
func ValidateJWT(cfg JWTConfig, token string) (Token, error) {
	var t Token
	parts := splitDots(token)
	if len(parts) != 3 {
		return t, failed("invalid_token: not a compact JWS")
	}
	var hdr struct {
		Alg  string   `json:"alg"`
		Kid  string   `json:"kid"`
		Crit []string `json:"crit"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return t, failed("invalid_token: bad header")
	}
	if len(hdr.Crit) > 0 {
		return t, failed("invalid_token: critical header parameters are not supported")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return t, failed("invalid_token: bad signature encoding")
	}
	switch {
	case hdr.Alg == "none" && cfg.AllowUnsecured && len(sig) == 0:
	case hdr.Alg == "none":
		return t, failed("invalid_token: unsecured tokens are not accepted")
	case cfg.Keys == nil:
		return t, failed("invalid_token: no keys configured")
	default:
		key, err := cfg.Keys.Key(hdr.Kid)
		if err != nil {
			return t, failed("invalid_token: " + err.Error())
		}
		if err := verifyJWS(hdr.Alg, key, []byte(parts[0]+"."+parts[1]), sig); err != nil {
			return t, failed("invalid_token: " + err.Error())
		}
	}
	var claims map[string]json.RawMessage
	if err := decodeSegment(parts[1], &claims); err != nil {
		return t, failed("invalid_token: bad claims")
	}
	now := time.Now()
	if cfg.Now != nil {
		now = cfg.Now()
	}
	skew := cfg.ClockSkew
	if skew == 0 {
		skew = 30 * time.Second
	}
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return t, failed("invalid_token: missing or bad exp")
	}
	if !now.Before(exp.Add(skew)) {
		return t, failed("invalid_token: token expired")
	}
	if nbf, ok := numericDate(claims["nbf"]); claims["nbf"] != nil && (!ok || now.Add(skew).Before(nbf)) {
		return t, failed("invalid_token: token not valid yet")
	}
	if iat, ok := numericDate(claims["iat"]); claims["iat"] != nil && (!ok || now.Add(skew).Before(iat)) {
		return t, failed("invalid_token: token issued in the future")
	}
	if cfg.Issuer != "" {
		var iss string
		if json.Unmarshal(claims["iss"], &iss) != nil || iss != cfg.Issuer {
			return t, failed("invalid_token: wrong issuer")
		}
	}
	if cfg.Audience != "" {
		var one string
		var many []string
		raw := claims["aud"]
		okAud := (json.Unmarshal(raw, &one) == nil && one == cfg.Audience) ||
			(json.Unmarshal(raw, &many) == nil && slices.Contains(many, cfg.Audience))
		if !okAud {
			return t, failed("invalid_token: wrong audience")
		}
	}
	pc := cfg.PrincipalClaim
	if pc == "" {
		pc = "sub"
	}
	var principal string
	if json.Unmarshal(claims[pc], &principal) != nil || principal == "" {
		return t, failed("invalid_token: missing principal claim " + pc)
	}
	return Token{Principal: UserPrincipal(principal), Expiry: exp}, nil
}

func splitDots(s string) []string {
	var out []string
	for range 3 {
		i := indexByte(s, '.')
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return append(out, s)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// numericDate decodes a JWT NumericDate (seconds, possibly fractional).
func numericDate(raw json.RawMessage) (time.Time, bool) {
	if raw == nil {
		return time.Time{}, false
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f < 0 || f > 1e11 {
		return time.Time{}, false
	}
	return time.Unix(0, 0).Add(time.Duration(f * float64(time.Second))), true
}

var errBadSig = errors.New("signature does not verify")

// verifyJWS checks sig over signed with key under alg.
func verifyJWS(alg string, key crypto.PublicKey, signed, sig []byte) error {
	var h crypto.Hash
	switch alg {
	case "RS256", "PS256", "ES256":
		h = crypto.SHA256
	case "RS384", "PS384", "ES384":
		h = crypto.SHA384
	case "RS512", "PS512", "ES512":
		h = crypto.SHA512
	case "EdDSA":
		k, ok := key.(ed25519.PublicKey)
		if !ok {
			return errors.New("key type does not match alg EdDSA")
		}
		if !ed25519.Verify(k, signed, sig) {
			return errBadSig
		}
		return nil
	default:
		return fmt.Errorf("unsupported alg %q", alg)
	}
	var digest []byte
	switch h {
	case crypto.SHA256:
		d := sha256.Sum256(signed)
		digest = d[:]
	case crypto.SHA384:
		d := sha512.Sum384(signed)
		digest = d[:]
	default:
		d := sha512.Sum512(signed)
		digest = d[:]
	}
	switch alg[0] {
	case 'R':
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return fmt.Errorf("key type does not match alg %s", alg)
		}
		if rsa.VerifyPKCS1v15(k, h, digest, sig) != nil {
			return errBadSig
		}
	case 'P':
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return fmt.Errorf("key type does not match alg %s", alg)
		}
		if rsa.VerifyPSS(k, h, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) != nil {
			return errBadSig
		}
	case 'E':
		k, ok := key.(*ecdsa.PublicKey)
		if !ok {
			return fmt.Errorf("key type does not match alg %s", alg)
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		if want := map[string]int{"ES256": 32, "ES384": 48, "ES512": 66}[alg]; size != want || len(sig) != 2*size {
			return errBadSig
		}
		r := new(big.Int).SetBytes(sig[:size])
		s := new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(k, digest, r, s) {
			return errBadSig
		}
	}
	return nil
}

// JWKS is a parsed key set, by kid.
type JWKS struct {
	keys map[string]crypto.PublicKey
}

// ParseJWKS parses a JSON Web Key Set. Keys of unknown types or for
// encryption only ("use":"enc") are skipped; a set without any usable key
// is an error.
func ParseJWKS(data []byte) (*JWKS, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			N   string `json:"n"`
			E   string `json:"e"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Y   string `json:"y"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	out := &JWKS{keys: map[string]crypto.PublicKey{}}
	b64 := base64.RawURLEncoding
	for _, k := range set.Keys {
		if k.Use == "enc" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err1 := b64.DecodeString(k.N)
			e, err2 := b64.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(n) < 256 || len(e) == 0 || len(e) > 4 {
				return nil, fmt.Errorf("jwks: key %q: bad RSA key (at least 2048 bits)", k.Kid)
			}
			out.keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case "EC":
			var curve elliptic.Curve
			switch k.Crv {
			case "P-256":
				curve = elliptic.P256()
			case "P-384":
				curve = elliptic.P384()
			case "P-521":
				curve = elliptic.P521()
			default:
				return nil, fmt.Errorf("jwks: key %q: unsupported curve %q", k.Kid, k.Crv)
			}
			x, err1 := b64.DecodeString(k.X)
			y, err2 := b64.DecodeString(k.Y)
			size := (curve.Params().BitSize + 7) / 8
			if err1 != nil || err2 != nil || len(x) != size || len(y) != size {
				return nil, fmt.Errorf("jwks: key %q: bad EC key", k.Kid)
			}
			// Uncompressed point encoding, validated on the curve.
			pt := append(append([]byte{4}, x...), y...)
			pub, err := ecdsa.ParseUncompressedPublicKey(curve, pt)
			if err != nil {
				return nil, fmt.Errorf("jwks: key %q: %w", k.Kid, err)
			}
			out.keys[k.Kid] = pub
		case "OKP":
			x, err := b64.DecodeString(k.X)
			if k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("jwks: key %q: bad OKP key", k.Kid)
			}
			out.keys[k.Kid] = ed25519.PublicKey(x)
		}
	}
	if len(out.keys) == 0 {
		return nil, errors.New("jwks: no usable signature key")
	}
	return out, nil
}

// Key implements KeySource.
func (s *JWKS) Key(kid string) (crypto.PublicKey, error) {
	if k, ok := s.keys[kid]; ok {
		return k, nil
	}
	if kid == "" && len(s.keys) == 1 {
		for _, k := range s.keys {
			return k, nil
		}
	}
	return nil, fmt.Errorf("unknown key id %q", kid)
}

// JWKSFile is a KeySource read from a file and read again when the
// file's modification time or size changes (checked at most once per
// second), so keys rotate without a restart. A file that stops parsing
// keeps the last good set in use (the error is reported by Err).
type JWKSFile struct {
	path string

	mu      sync.Mutex
	set     *JWKS
	mod     time.Time
	size    int64
	checked time.Time
	err     error
}

// OpenJWKSFile reads path; it fails if the file has no usable key.
func OpenJWKSFile(path string) (*JWKSFile, error) {
	f := &JWKSFile{path: path}
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *JWKSFile) reload() error {
	fi, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	if f.set != nil && fi.ModTime().Equal(f.mod) && fi.Size() == f.size {
		return nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	set, err := ParseJWKS(data)
	if err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	f.set, f.mod, f.size = set, fi.ModTime(), fi.Size()
	return nil
}

// Key implements KeySource.
func (f *JWKSFile) Key(kid string) (crypto.PublicKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) >= time.Second {
		f.checked = time.Now()
		f.err = f.reload()
	}
	return f.set.Key(kid)
}

// JWKSURL is a KeySource fetched over HTTP(S), refreshed every Refresh
// (default 5 minutes) and at most once per 10 seconds on an unknown kid
// (key rotation). The last good set stays in use when a fetch fails.
type JWKSURL struct {
	url     string
	client  *http.Client
	refresh time.Duration

	mu      sync.Mutex
	set     *JWKS
	fetched time.Time
}

// OpenJWKSURL fetches url once; it fails if that fetch fails.
func OpenJWKSURL(ctx context.Context, url string, client *http.Client, refresh time.Duration) (*JWKSURL, error) {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	if refresh <= 0 {
		refresh = 5 * time.Minute
	}
	u := &JWKSURL{url: url, client: client, refresh: refresh}
	if err := u.fetch(ctx); err != nil {
		return nil, err
	}
	return u, nil
}

func (u *JWKSURL) fetch(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url, nil)
	if err != nil {
		return err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return fmt.Errorf("jwks: fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jwks: fetch: status %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("jwks: fetch: %w", err)
	}
	set, err := ParseJWKS(data)
	if err != nil {
		return err
	}
	u.set, u.fetched = set, time.Now()
	return nil
}

// Key implements KeySource. A refresh runs on the caller's goroutine,
// bounded by the client's timeout.
func (u *JWKSURL) Key(kid string) (crypto.PublicKey, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	// fetched is the last attempt, failed or not: a failing endpoint is
	// retried at these rates too, not on every authentication.
	if time.Since(u.fetched) >= u.refresh {
		u.fetched = time.Now()
		_ = u.fetch(context.Background())
	}
	k, err := u.set.Key(kid)
	if err != nil && time.Since(u.fetched) >= 10*time.Second {
		u.fetched = time.Now()
		if u.fetch(context.Background()) == nil {
			k, err = u.set.Key(kid)
		}
	}
	return k, err
}
