package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/authz"
	"github.com/weirhq/weir/registry"
)

// httpOptions are weir serve's settings of its HTTP fronts: --http-addr
// (/metrics, /healthz, the admin API) and the schema registry's
// --registry-addr. Both authenticate with the Kafka listeners' credentials
// (basic auth against the SCRAM users, or a client certificate) and apply
// the broker's ACLs (broker/httpauth.go); /healthz stays open for probes.
type httpOptions struct {
	tls        bool
	clientAuth string
	auth       string
}

func (h *httpOptions) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&h.tls, "http-tls", false, "serve --http-addr and the schema registry over HTTPS with --tls-cert/--tls-key (reloaded when they change)")
	f.StringVar(&h.clientAuth, "http-client-auth", "", `client certificates on the HTTPS fronts: "requested" (default with --tls-client-ca: verified when presented, so basic auth and mTLS clients share the port), "required" or "none"`)
	f.StringVar(&h.auth, "http-auth", "", `"required": every HTTP request (but /healthz) authenticates with basic auth (a SCRAM user), a client certificate or (with OAUTHBEARER configured) a bearer token, else 401; "optional": requests without credentials are User:ANONYMOUS. Default: required when a Kafka listener authenticates its clients (SASL, or SSL with required client certificates), else optional`)
}

// validate checks the settings that do not need the broker.
func (h *httpOptions) validate() error {
	if h.auth != "" {
		if _, err := broker.ParseHTTPAuthMode(h.auth); err != nil {
			return fmt.Errorf("--http-auth: %w", err)
		}
	}
	switch h.clientAuth {
	case "", "none", "requested", "required":
	default:
		return fmt.Errorf(`--http-client-auth must be "none", "requested" or "required", got %q`, h.clientAuth)
	}
	if h.clientAuth != "" && h.clientAuth != "none" && !h.tls {
		return fmt.Errorf("--http-client-auth %s needs --http-tls", h.clientAuth)
	}
	return nil
}

// mode is the authentication mode of the HTTP fronts: --http-auth, or by
// default the Kafka listeners' stance: required as soon as one listener
// authenticates its clients, since the broker then has users to ask for.
func (h *httpOptions) mode(ls []broker.Listener, tlsCfg broker.TLSConfig, per map[string]broker.ListenerSecurity) broker.HTTPAuthMode {
	if h.auth != "" {
		m, _ := broker.ParseHTTPAuthMode(h.auth) // validated
		return m
	}
	for _, l := range ls {
		if l.Protocol.Authenticated(certRequired(l, tlsCfg, per)) {
			return broker.HTTPAuthRequired
		}
	}
	return broker.HTTPAuthOptional
}

// registryPrincipal is the in-process schema registry's Kafka principal
// (broker.DialInternal): not a User, so no network client can claim it.
// weir serve makes it a super user when the authorizer is on: the
// registry's users are authorized at its HTTP front (registryACL), and
// the registry itself must reach its topic from the first start, before
// any ACL can exist.
const registryPrincipal = "Internal:schema-registry"

// httpFront is how weir serve's HTTP servers take requests: TLS (nil:
// plain HTTP) and the authentication wrapped around their handlers.
type httpFront struct {
	tls  *tls.Config
	mode broker.HTTPAuthMode
	wrap func(http.Handler) http.Handler
	// authorizer applies the ACLs to the schema registry's requests (nil:
	// none).
	authorizer registry.Authorizer
}

func (h *httpOptions) front(b *broker.Broker, mode broker.HTTPAuthMode) (*httpFront, error) {
	f := &httpFront{mode: mode, authorizer: registryACL(b),
		wrap: func(next http.Handler) http.Handler { return b.HTTPAuthenticator(mode, next) }}
	if h.tls {
		c, err := b.HTTPTLSConfig(h.clientAuth)
		if err != nil {
			return nil, fmt.Errorf("--http-tls: %w", err)
		}
		f.tls = c
	}
	return f, nil
}

// listener wraps ln in TLS when the front has it.
func (f *httpFront) listener(ln net.Listener) net.Listener {
	if f == nil || f.tls == nil {
		return ln
	}
	return tls.NewListener(ln, f.tls)
}

// handler is next behind the front's authentication (next itself when f
// is nil).
func (f *httpFront) handler(next http.Handler) http.Handler {
	if f == nil {
		return next
	}
	return f.wrap(next)
}

func (f *httpFront) scheme() string {
	if f != nil && f.tls != nil {
		return "https"
	}
	return "http"
}

// serveHandler is weir serve's --http-addr handler: /healthz open, the
// rest (/metrics with its cluster DESCRIBE, the admin API /v1/) behind the
// front.
func serveHandler(b *broker.Broker, f *httpFront, metricsAndHealth http.Handler) http.Handler {
	authed := http.NewServeMux()
	authed.Handle("/v1/", b.AdminHandler())
	authed.Handle("/", metricsACL(b, metricsAndHealth)) // serve_authz.go
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", metricsAndHealth)
	mux.Handle("/", f.handler(authed))
	return mux
}

// registryACL applies the broker's ACLs to the schema registry's requests
// with the registry's mapping of its actions onto Kafka ACLs
// (registry.KafkaACLs), a subject standing for its topic.
func registryACL(b *broker.Broker) registry.Authorizer {
	return registry.ACLAuthorizer(func(r *http.Request, op kmsg.ACLOperation, cluster bool, topic string) bool {
		if cluster {
			return b.Authorized(r, authz.Operation(op), authz.ResourceCluster, authz.ClusterName)
		}
		return b.Authorized(r, authz.Operation(op), authz.ResourceTopic, topic)
	})
}

// warnHTTPExposed writes a banner to w and logs a warning when an HTTP
// front on a non-loopback address serves anonymous requests, or takes
// passwords over plain HTTP.
func warnHTTPExposed(w io.Writer, logger *slog.Logger, name, addr string, f *httpFront) {
	host, _, err := net.SplitHostPort(addr)
	if err == nil && isLoopbackHost(host) {
		return
	}
	var problems []string
	if f.mode == broker.HTTPAuthOptional {
		problems = append(problems, "serves requests WITHOUT AUTHENTICATION (as User:ANONYMOUS; --http-auth required refuses them)")
	}
	if f.tls == nil {
		problems = append(problems, "takes basic-auth passwords over plain HTTP (--http-tls encrypts them)")
	}
	for _, p := range problems {
		fmt.Fprintf(w, "\n!!! WARNING: %s on %s %s.\n\n", name, addr, p)
		logger.Warn("http front exposed on a non-loopback address", "front", name, "addr", addr, "problem", p)
	}
}

// frontSummary describes a front for the startup log.
func frontSummary(f *httpFront) string {
	parts := []string{f.scheme(), "auth " + string(f.mode)}
	return strings.Join(parts, ", ")
}

// queryFront is the middleware weir gives a stream App's query API
// (stream.QueryMiddleware): the broker's HTTP authentication in mode, then
// the ACLs on what each route reveals:
//
//	GET /v1/stores                   DESCRIBE on the App's group (its application id)
//	GET /v1/stores/{store}/get       READ on the store's changelog topic
//	GET /v1/stores/{store}/range     READ on the store's changelog topic
//	GET /v1/stores/{store}/metadata  DESCRIBE on the store's changelog topic
//
// Whoever may read a changelog can rebuild its store from it, so reading
// the store through the API needs exactly that. changelogOf names a store's
// changelog (App.Stores' Changelog: for a table-backed store, the table's
// topic); a refused request is 403 {"code":"forbidden"} in the API's error
// shape. Other paths go to the API unchecked (its 404s).
func queryFront(b *broker.Broker, mode broker.HTTPAuthMode, appID string, changelogOf func(store string) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		check := func(op authz.Operation, rt authz.ResourceType, name func(*http.Request) string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := name(r)
				if !b.Authorized(r, op, rt, n) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusForbidden)
					_ = json.NewEncoder(w).Encode(map[string]string{"code": "forbidden",
						"error": fmt.Sprintf("not authorized: %s on %s %s", op, rt, n)})
					return
				}
				next.ServeHTTP(w, r)
			})
		}
		group := func(*http.Request) string { return appID }
		changelog := func(r *http.Request) string { return changelogOf(r.PathValue("store")) }
		mux := http.NewServeMux()
		mux.Handle("GET /v1/stores", check(authz.OpDescribe, authz.ResourceGroup, group))
		mux.Handle("GET /v1/stores/{store}/get", check(authz.OpRead, authz.ResourceTopic, changelog))
		mux.Handle("GET /v1/stores/{store}/range", check(authz.OpRead, authz.ResourceTopic, changelog))
		mux.Handle("GET /v1/stores/{store}/metadata", check(authz.OpDescribe, authz.ResourceTopic, changelog))
		mux.Handle("GET /v1/describe", check(authz.OpDescribe, authz.ResourceGroup, group))
		mux.Handle("/", next)
		return b.HTTPAuthenticator(mode, mux)
	}
}

// streamChangelog is a stream App's changelog topic of a store that is not
// a table: "<app>-<store>-changelog" (the stream package's naming).
func streamChangelog(appID string) func(store string) string {
	return func(store string) string { return appID + "-" + store + "-changelog" }
}
