package auth

import (
	"strings"
	"time"
)

// OAUTHBEARER (RFC 7628) as Kafka speaks it: the client's first message is
// gs2-header \x01 "auth=Bearer " token \x01 [key=value \x01]* \x01. A valid
// token ends the exchange. An invalid one is answered, as Kafka does, with
// an error JSON ({"status":"invalid_token"}); the client acknowledges with
// a lone \x01 and the exchange then fails with the reason.

// ParseOAuthBearer extracts the bearer token and extensions from a client
// first message.
func ParseOAuthBearer(msg []byte) (token string, ext map[string]string, err error) {
	s := string(msg)
	gs2, rest, ok := strings.Cut(s, "\x01")
	if !ok || !strings.HasSuffix(rest, "\x01\x01") {
		return "", nil, malformed("OAUTHBEARER: bad message framing")
	}
	if gs2 != "n,," && !(strings.HasPrefix(gs2, "n,a=") && strings.HasSuffix(gs2, ",")) && gs2 != "y,," {
		return "", nil, malformed("OAUTHBEARER: bad GS2 header")
	}
	ext = map[string]string{}
	for _, kv := range strings.Split(rest[:len(rest)-2], "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return "", nil, malformed("OAUTHBEARER: bad key=value pair")
		}
		if k == "auth" {
			scheme, tok, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
				return "", nil, malformed("OAUTHBEARER: auth is not a bearer token")
			}
			token = strings.TrimSpace(tok)
			continue
		}
		ext[k] = v
	}
	if token == "" {
		return "", nil, malformed("OAUTHBEARER: missing auth=Bearer token")
	}
	return token, ext, nil
}

type oauthSession struct {
	cfg     JWTConfig
	step    int
	failure error
	tok     Token
}

// NewOAuthSession starts an OAUTHBEARER exchange validating tokens with cfg.
func NewOAuthSession(cfg JWTConfig) Session { return &oauthSession{cfg: cfg} }

func (s *oauthSession) Principal() string { return s.tok.Principal }
func (s *oauthSession) Expiry() time.Time { return s.tok.Expiry }

func (s *oauthSession) Step(msg []byte) ([]byte, bool, error) {
	switch s.step {
	case 0:
		s.step++
		token, _, err := ParseOAuthBearer(msg)
		if err != nil {
			return nil, false, err
		}
		tok, err := ValidateJWT(s.cfg, token)
		if err != nil {
			s.failure = err
			return []byte(`{"status":"invalid_token"}`), false, nil
		}
		s.tok = tok
		return nil, true, nil
	case 1:
		s.step++
		if string(msg) != "\x01" {
			return nil, false, malformed("OAUTHBEARER: expected the client's acknowledgement of the error")
		}
		return nil, false, s.failure
	}
	return nil, false, malformed("OAUTHBEARER: exchange already finished")
}
