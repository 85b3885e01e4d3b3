package broker

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Listeners, as Kafka configures them:
//
//	listeners=PLAINTEXT://127.0.0.1:9092,CLIENTS://0.0.0.0:9093
//	advertised.listeners=PLAINTEXT://127.0.0.1:9092,CLIENTS://kafka.example.com:9093
//	listener.security.protocol.map=CLIENTS:SASL_SSL
//
// Each listener has a name, a listen address, an advertised address and a
// security protocol. A connection is served under its listener's protocol:
// SSL and SASL_SSL wrap it in TLS (tls.go), SASL_PLAINTEXT and SASL_SSL
// admit only ApiVersions and the SASL exchange until the client is
// authenticated (sasl.go). Metadata, DescribeCluster and FindCoordinator
// answer with the advertised address of the listener the request came in
// on, as Kafka does, so a client stays on the listener it bootstrapped
// from.

// SecurityProtocol is a listener's Kafka security protocol.
type SecurityProtocol string

const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

func (p SecurityProtocol) valid() bool {
	switch p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return true
	}
	return false
}

// TLS reports whether the protocol runs over TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether the protocol requires SASL authentication.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// Authenticated reports whether clients of the protocol prove who they
// are: SASL always, SSL only when client certificates are required.
func (p SecurityProtocol) Authenticated(clientCertRequired bool) bool {
	return p.SASL() || (p == SSL && clientCertRequired)
}

// Listener is one Kafka listener.
type Listener struct {
	// Name is the listener name (Kafka's, e.g. "PLAINTEXT", "INTERNAL");
	// unique among the listeners.
	Name string
	// Addr is the host:port to listen on (port 0 picks one).
	Addr string
	// Advertised is the host:port clients are told to connect to; default
	// the listen address (the host name when listening on all
	// interfaces).
	Advertised string
	// Protocol is the security protocol (default PLAINTEXT).
	Protocol SecurityProtocol
}

// ParseListeners reads Kafka's listeners, advertised.listeners and
// listener.security.protocol.map settings. A listener whose name is not in
// the map must be named after its protocol. advertised may name a subset
// of the listeners; protocolMap may be empty.
func ParseListeners(listeners, advertised, protocolMap string) ([]Listener, error) {
	protos := map[string]SecurityProtocol{}
	for _, kv := range splitCSV(protocolMap) {
		name, p, ok := strings.Cut(kv, ":")
		proto := SecurityProtocol(strings.ToUpper(strings.TrimSpace(p)))
		if !ok || name == "" || !proto.valid() {
			return nil, fmt.Errorf("listener.security.protocol.map: bad entry %q (want NAME:PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL)", kv)
		}
		protos[strings.ToUpper(strings.TrimSpace(name))] = proto
	}
	var out []Listener
	seen := map[string]bool{}
	for _, l := range splitCSV(listeners) {
		name, addr, err := parseListenerURL(l)
		if err != nil {
			return nil, fmt.Errorf("listeners: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("listeners: listener name %s given twice", name)
		}
		seen[name] = true
		proto, ok := protos[name]
		if !ok {
			proto = SecurityProtocol(name)
			if !proto.valid() {
				return nil, fmt.Errorf("listeners: listener %s is not in listener.security.protocol.map and is not a security protocol name", name)
			}
		}
		out = append(out, Listener{Name: name, Addr: addr, Protocol: proto})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("listeners: none given")
	}
	for _, a := range splitCSV(advertised) {
		name, addr, err := parseListenerURL(a)
		if err != nil {
			return nil, fmt.Errorf("advertised.listeners: %w", err)
		}
		found := false
		for i := range out {
			if out[i].Name == name {
				if out[i].Advertised != "" {
					return nil, fmt.Errorf("advertised.listeners: listener name %s given twice", name)
				}
				out[i].Advertised, found = addr, true
			}
		}
		if !found {
			return nil, fmt.Errorf("advertised.listeners: %s is not a listener", name)
		}
	}
	return out, nil
}

// parseListenerURL parses "NAME://host:port" (host may be empty: all
// interfaces, as Kafka).
func parseListenerURL(s string) (name, addr string, err error) {
	name, addr, ok := strings.Cut(s, "://")
	if !ok || name == "" {
		return "", "", fmt.Errorf("%q: want NAME://host:port", s)
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return "", "", fmt.Errorf("%q: want NAME://host:port", s)
	}
	return strings.ToUpper(name), addr, nil
}

func splitCSV(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// FormatListeners renders listeners in Kafka's listeners syntax.
func FormatListeners(ls []Listener) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.Name + "://" + l.Addr
	}
	return strings.Join(parts, ",")
}

// listener is a running Listener.
type listener struct {
	Listener
	ln   net.Listener
	host string // advertised
	port int32
	tls  *tls.Config // nil for PLAINTEXT and SASL_PLAINTEXT
}

// effectiveListeners is cfg.Listeners, or the single PLAINTEXT listener
// of KafkaAddr and AdvertisedAddr when none are configured. Defaults are
// filled in; names and protocols are checked.
func (c *Config) effectiveListeners() ([]Listener, error) {
	ls := c.Listeners
	if len(ls) == 0 {
		ls = []Listener{{Name: string(Plaintext), Addr: c.KafkaAddr, Advertised: c.AdvertisedAddr, Protocol: Plaintext}}
	}
	out := make([]Listener, len(ls))
	seen := map[string]bool{}
	for i, l := range ls {
		if l.Protocol == "" {
			l.Protocol = Plaintext
		}
		if !l.Protocol.valid() {
			return nil, fmt.Errorf("listener %s: unknown security protocol %q", l.Name, l.Protocol)
		}
		if l.Name == "" {
			l.Name = string(l.Protocol)
		}
		if seen[l.Name] {
			return nil, fmt.Errorf("listener name %s given twice", l.Name)
		}
		seen[l.Name] = true
		if l.Addr == "" {
			return nil, fmt.Errorf("listener %s: no address", l.Name)
		}
		out[i] = l
	}
	return out, nil
}

// openListener listens on l and resolves its advertised host and port.
func (b *Broker) openListener(l Listener, tlsCfg *tls.Config) (*listener, error) {
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s %s: %w", l.Name, l.Addr, err)
	}
	adv := l.Advertised
	if adv == "" {
		adv = ln.Addr().String()
	}
	host, portStr, err := net.SplitHostPort(adv)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listener %s: advertised address %q: %w", l.Name, adv, err)
	}
	if l.Advertised == "" {
		if h := advertisedHost(host, os.Hostname); h != host {
			host = h
			b.logger.Warn("listening on all interfaces without an advertised address: advertising the host name", "listener", l.Name, "host", host)
		}
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listener %s: advertised port %q: %w", l.Name, portStr, err)
	}
	return &listener{Listener: l, ln: ln, host: host, port: int32(port), tls: tlsCfg}, nil
}

// Listeners returns the listeners with their bound addresses (a port 0 of
// the configuration resolved) in Addr.
func (b *Broker) Listeners() []Listener {
	out := make([]Listener, len(b.listeners))
	for i, l := range b.listeners {
		out[i] = l.Listener
		out[i].Addr = l.ln.Addr().String()
		out[i].Advertised = net.JoinHostPort(l.host, strconv.Itoa(int(l.port)))
	}
	return out
}

// ListenerAddr is the bound address of the named listener, or "".
func (b *Broker) ListenerAddr(name string) string {
	for _, l := range b.listeners {
		if l.Name == name {
			return l.ln.Addr().String()
		}
	}
	return ""
}

// endpoint is the advertised host and port for a request: those of the
// listener its connection came in on.
func (b *Broker) endpoint(s *slot) (string, int32) {
	if s != nil && s.conn != nil && s.conn.lis != nil {
		return s.conn.lis.host, s.conn.lis.port
	}
	return b.host, b.port
}
