package broker

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// In-process connections: a component running in the broker's process
// (weir serve's schema registry) talks to the broker as any Kafka client
// does, over a connection without a socket, served like one that came in
// on a PLAINTEXT listener (the first listener's advertised address in
// Metadata), with a principal of its own. That principal's type is not
// User, and SASL, mTLS and OAUTHBEARER only ever produce User principals,
// so no network client can claim it; ACLs and super.users name it like
// any other.

// ErrBrokerClosed is returned by DialInternal once Close has begun.
var ErrBrokerClosed = errors.New("broker: closed")

// DialInternal returns a new in-process connection to the broker whose
// requests are authorized as principal, which must be of the form
// "Type:name" with a Type other than User ("Internal:schema-registry").
// Give it to a Kafka client as its dialer (franz-go: kgo.Dialer), for
// every broker address. The connection ends when either side closes it or
// the broker closes.
func (b *Broker) DialInternal(principal string) (net.Conn, error) {
	typ, name, ok := strings.Cut(principal, ":")
	if !ok || typ == "" || name == "" || strings.EqualFold(typ, "User") {
		return nil, fmt.Errorf("broker: internal principal %q: want Type:name with a Type other than User", principal)
	}
	client, server := net.Pipe()
	c := newConn(b, server)
	c.principal = principal
	if !b.track(c) {
		client.Close()
		return nil, ErrBrokerClosed
	}
	return client, nil
}
