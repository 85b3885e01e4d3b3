package stream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The query HTTP API (JSON). Served by QueryHandler; instances forward to
// each other through it.
//
//	GET /v1/stores                          the stores, their partitions and the ones served here
//	GET /v1/stores/{store}/get?key=K        one key: 200 {"store","entry"}, 404 {"code":"not_found"} if absent
//	GET /v1/stores/{store}/range?from=F&to=T&limit=N
//	                                        entries from <= key < to in encoded-key order
//	GET /v1/stores/{store}/metadata?key=K   where the key lives: {"partition","local","active","standbys"}
//	GET /v1/describe                        App.Describe (text/plain): what the App guarantees and how
//
// A global table's store is listed with "global": true and answered by
// every instance from its own replica (partition -1).
//
// Keys are given as text parsed by the store's key type (a string as is,
// anything else as JSON: 42, {"zone":"a"}) or, with key64/from64/to64, as
// the encoded key bytes in standard base64. Each entry holds the decoded
// key and value (when the store's codecs decode them) and the raw bytes
// (key64, value64). Errors answer {"error": text, "code": code}:
//
//	400 bad_request · 404 unknown_store, not_found · 502 no_route ·
//	503 rebalancing, restoring, not_running, owner_unavailable (retriable; Retry-After: 1)
//
// stale=1 is AllowStale: a standby copy may answer (the entry says
// "stale": true). Internal parameters: local=1 serves only this instance's
// partitions (a forwarded request never forwards again) and, for range,
// partitions=0,3 names them.

// httpEntry is a StoreEntry in JSON.
type httpEntry struct {
	Key         json.RawMessage `json:"key,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
	Key64       []byte          `json:"key64"`
	Value64     []byte          `json:"value64"`
	TimestampMs int64           `json:"timestamp_ms"`
	Partition   int32           `json:"partition"`
	Stale       bool            `json:"stale,omitempty"`
}

type httpGetResponse struct {
	Store string    `json:"store"`
	Entry httpEntry `json:"entry"`
}

type httpRangeResponse struct {
	Store   string      `json:"store"`
	Entries []httpEntry `json:"entries"`
}

type httpStore struct {
	Name       string  `json:"name"`
	Partitions int32   `json:"partitions"`
	Local      []int32 `json:"local_partitions"`
	// Global: a global table's store, held whole by every instance
	// (partitions 0, no local partitions; its entries have partition -1).
	Global bool `json:"global,omitempty"`
}

type httpError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// errKeyNotFound is the HTTP API's answer for an absent key.
var errKeyNotFound = errors.New("stream: key not found")

// errBadRequest marks malformed query parameters.
var errBadRequest = errors.New("stream: bad request")

// errorCodes maps query errors to their wire code and HTTP status, in the
// order they are tested.
var errorCodes = []struct {
	err    error
	code   string
	status int
}{
	{ErrUnknownStore, "unknown_store", http.StatusNotFound},
	{errKeyNotFound, "not_found", http.StatusNotFound},
	{errBadRequest, "bad_request", http.StatusBadRequest},
	{ErrNoRoute, "no_route", http.StatusBadGateway},
	{ErrRebalancing, "rebalancing", http.StatusServiceUnavailable},
	{ErrRestoring, "restoring", http.StatusServiceUnavailable},
	{ErrNotRunning, "not_running", http.StatusServiceUnavailable},
	{ErrOwnerUnavailable, "owner_unavailable", http.StatusServiceUnavailable},
	{errNotLocal, "rebalancing", http.StatusServiceUnavailable}, // a forwarded request missed: the view moved
}

// QueryHandler returns the query HTTP API of the App. Mount it where the
// advertised endpoint points (at "/" of QueryServer's listener, or under
// the base URL given to AdvertisedQueryEndpoint). It is safe to serve
// before Run: queries then answer not_running.
func (a *App) QueryHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stores", a.httpStores)
	mux.HandleFunc("GET /v1/stores/{store}/get", a.httpGet)
	mux.HandleFunc("GET /v1/stores/{store}/range", a.httpRange)
	mux.HandleFunc("GET /v1/stores/{store}/metadata", a.httpMetadata)
	mux.HandleFunc("GET /v1/describe", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, a.Describe())
	})
	return mux
}

func (a *App) httpStores(w http.ResponseWriter, _ *http.Request) {
	out := []httpStore{}
	for _, name := range sortedKeys(a.stores) {
		s := httpStore{Name: name, Local: []int32{}}
		a.query.mu.RLock()
		s.Partitions = a.query.partitions[name]
		for id := range a.query.tasks {
			if a.storeTask(a.stores[name], id.partition) == id {
				s.Local = append(s.Local, id.partition)
			}
		}
		a.query.mu.RUnlock()
		slices.Sort(s.Local)
		out = append(out, s)
	}
	for _, g := range a.b.globals {
		out = append(out, httpStore{Name: g.store, Local: []int32{}, Global: true})
	}
	slices.SortFunc(out, func(x, y httpStore) int { return strings.Compare(x.Name, y.Name) })
	writeJSON(w, http.StatusOK, map[string]any{"stores": out, "endpoint": a.queryEndpoint()})
}

// keyParam reads a key given as text (name) or base64 (name+"64"); nil if
// neither is present.
func (a *App) keyParam(spec *storeSpec, q url.Values, name string) ([]byte, error) {
	if b64, ok := q[name+"64"]; ok {
		b, err := base64.StdEncoding.DecodeString(b64[0])
		if err != nil {
			return nil, fmt.Errorf("%w: %s64: %v", errBadRequest, name, err)
		}
		return b, nil
	}
	text, ok := q[name]
	if !ok {
		return nil, nil
	}
	if spec.codecs == nil {
		return []byte(text[0]), nil
	}
	b, err := spec.codecs.parseKey(text[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errBadRequest, name, err)
	}
	return b, nil
}

// pathStore returns the store named in the request's path, or answers
// ErrUnknownStore and returns false.
func (a *App) pathStore(w http.ResponseWriter, r *http.Request) (string, *storeSpec, bool) {
	name := r.PathValue("store")
	if g := a.globalStore(name); g != nil {
		return name, g.querySpec(), true
	}
	spec, ok := a.stores[name]
	if !ok {
		writeError(w, fmt.Errorf("%w: %q", ErrUnknownStore, name))
	}
	return name, spec, ok
}

func (a *App) httpGet(w http.ResponseWriter, r *http.Request) {
	name, spec, ok := a.pathStore(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	key, err := a.keyParam(spec, q, "key")
	if err == nil && key == nil {
		err = fmt.Errorf("%w: key or key64 required", errBadRequest)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	var e StoreEntry
	var found bool
	stale := q.Get("stale") == "1"
	if q.Get("local") == "1" && !a.isGlobalStore(name) {
		_, n, terr := a.queryTarget(name)
		if terr != nil {
			writeError(w, terr)
			return
		}
		e, found, err = a.getLocal(spec, storeKeyPartition(spec, key, n), key, stale)
	} else {
		var opts []QueryOpt
		if stale {
			opts = append(opts, AllowStale())
		}
		e, found, err = a.Get(r.Context(), name, key, opts...)
	}
	if err == nil && !found {
		err = fmt.Errorf("%w: store %s", errKeyNotFound, name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, httpGetResponse{Store: name, Entry: toHTTPEntry(spec, e)})
}

type httpMetadata struct {
	Store     string   `json:"store"`
	Partition int32    `json:"partition"`
	Local     bool     `json:"local"`
	Active    string   `json:"active"`
	Standbys  []string `json:"standbys"`
}

func (a *App) httpMetadata(w http.ResponseWriter, r *http.Request) {
	name, spec, ok := a.pathStore(w, r)
	if !ok {
		return
	}
	key, err := a.keyParam(spec, r.URL.Query(), "key")
	if err == nil && key == nil {
		err = fmt.Errorf("%w: key or key64 required", errBadRequest)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	md, err := a.KeyMetadata(name, key)
	if err != nil {
		writeError(w, err)
		return
	}
	if md.Standbys == nil {
		md.Standbys = []string{}
	}
	writeJSON(w, http.StatusOK, httpMetadata{Store: name, Partition: md.Partition, Local: md.Local, Active: md.Active, Standbys: md.Standbys})
}

func (a *App) httpRange(w http.ResponseWriter, r *http.Request) {
	name, spec, ok := a.pathStore(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	from, err := a.keyParam(spec, q, "from")
	if err != nil {
		writeError(w, err)
		return
	}
	to, err := a.keyParam(spec, q, "to")
	if err != nil {
		writeError(w, err)
		return
	}
	limit := DefaultRangeLimit
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit <= 0 {
			writeError(w, fmt.Errorf("%w: limit %q", errBadRequest, s))
			return
		}
	}
	var es []StoreEntry
	stale := q.Get("stale") == "1"
	if q.Get("local") == "1" && !a.isGlobalStore(name) {
		ps, perr := parsePartitions(q.Get("partitions"))
		if perr != nil {
			writeError(w, perr)
			return
		}
		for _, p := range ps {
			pes, err := a.rangeLocal(spec, p, from, to, limit, stale)
			if err != nil {
				writeError(w, err)
				return
			}
			es = append(es, pes...)
		}
	} else if es, err = a.Range(r.Context(), name, from, to, limit, staleOpt(stale)...); err != nil {
		writeError(w, err)
		return
	}
	out := httpRangeResponse{Store: name, Entries: make([]httpEntry, len(es))}
	for i, e := range es {
		out.Entries[i] = toHTTPEntry(spec, e)
	}
	writeJSON(w, http.StatusOK, out)
}

func staleOpt(stale bool) []QueryOpt {
	if stale {
		return []QueryOpt{AllowStale()}
	}
	return nil
}

func parsePartitions(s string) ([]int32, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: partitions required with local=1", errBadRequest)
	}
	var out []int32
	for f := range strings.SplitSeq(s, ",") {
		p, err := strconv.ParseInt(f, 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("%w: partition %q", errBadRequest, f)
		}
		out = append(out, int32(p))
	}
	return out, nil
}

func toHTTPEntry(spec *storeSpec, e StoreEntry) httpEntry {
	h := httpEntry{Key64: e.Key, Value64: e.Value, TimestampMs: e.Timestamp.UnixMilli(), Partition: e.Partition, Stale: e.Stale}
	if h.Key64 == nil {
		h.Key64 = []byte{}
	}
	if h.Value64 == nil {
		h.Value64 = []byte{}
	}
	if spec.codecs != nil {
		h.Key = decodedJSON(spec.codecs.decodeKey, e.Key)
		h.Value = decodedJSON(spec.codecs.decodeValue, e.Value)
	}
	return h
}

// decodedJSON renders b decoded by dec as JSON, or nil if it does not
// decode (the raw bytes are still in the entry).
func decodedJSON(dec func([]byte) (any, error), b []byte) json.RawMessage {
	v, err := dec(b)
	if err != nil {
		return nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return j
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

func writeError(w http.ResponseWriter, err error) {
	code, status := "internal", http.StatusInternalServerError
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			code, status = c.code, c.status
			break
		}
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, httpError{Error: err.Error(), Code: code})
}

// Forwarding to the owner.

// endpointURL turns an advertised endpoint into a base URL.
func endpointURL(ep string) string {
	if strings.Contains(ep, "://") {
		return strings.TrimSuffix(ep, "/")
	}
	return "http://" + ep
}

// remoteCall GETs path?params from the instance at ep and decodes a 200
// answer into out; an error answer becomes the matching query error.
func (a *App) remoteCall(ctx context.Context, ep, path string, params url.Values, out any) error {
	params.Set("local", "1")
	u := endpointURL(ep) + path + "?" + params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNoRoute, ep, err)
	}
	resp, err := a.cfg.query.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s: %v", ErrOwnerUnavailable, ep, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("%w: %s: read answer: %v", ErrOwnerUnavailable, ep, err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%w: %s: bad answer: %v", ErrOwnerUnavailable, ep, err)
		}
		return nil
	}
	var he httpError
	if json.Unmarshal(body, &he) != nil || he.Code == "" {
		return fmt.Errorf("%w: %s answered %s", ErrOwnerUnavailable, ep, resp.Status)
	}
	for _, c := range errorCodes {
		if c.code == he.Code {
			if c.err == errNotLocal || c.err == ErrRebalancing {
				a.query.view.poke() // our view sent us to a non-owner
				return fmt.Errorf("%w: %s: %s", ErrRebalancing, ep, he.Error)
			}
			return fmt.Errorf("%w: %s: %s", c.err, ep, he.Error)
		}
	}
	return fmt.Errorf("%w: %s: %s (%s)", ErrOwnerUnavailable, ep, he.Error, he.Code)
}

func (a *App) remoteGet(ctx context.Context, ep, store string, p int32, key []byte, stale bool) (StoreEntry, bool, error) {
	params := url.Values{"key64": {base64.StdEncoding.EncodeToString(key)}}
	if stale {
		params.Set("stale", "1")
	}
	var resp httpGetResponse
	err := a.remoteCall(ctx, ep, "/v1/stores/"+url.PathEscape(store)+"/get", params, &resp)
	if errors.Is(err, errKeyNotFound) {
		return StoreEntry{}, false, nil
	}
	if err != nil {
		return StoreEntry{}, false, err
	}
	e := fromHTTPEntry(resp.Entry)
	if e.Partition != p {
		return StoreEntry{}, false, fmt.Errorf("%w: %s served partition %d for partition %d", ErrOwnerUnavailable, ep, e.Partition, p)
	}
	return e, true, nil
}

func (a *App) remoteRange(ctx context.Context, ep, store string, ps []int32, from, to []byte, limit int, stale bool) ([]StoreEntry, error) {
	params := url.Values{"limit": {strconv.Itoa(limit)}}
	if stale {
		params.Set("stale", "1")
	}
	if from != nil {
		params.Set("from64", base64.StdEncoding.EncodeToString(from))
	}
	if to != nil {
		params.Set("to64", base64.StdEncoding.EncodeToString(to))
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strconv.Itoa(int(p))
	}
	params.Set("partitions", strings.Join(parts, ","))
	var resp httpRangeResponse
	if err := a.remoteCall(ctx, ep, "/v1/stores/"+url.PathEscape(store)+"/range", params, &resp); err != nil {
		return nil, err
	}
	out := make([]StoreEntry, len(resp.Entries))
	for i, h := range resp.Entries {
		out[i] = fromHTTPEntry(h)
	}
	return out, nil
}

func fromHTTPEntry(h httpEntry) StoreEntry {
	return StoreEntry{Key: h.Key64, Value: h.Value64, Timestamp: time.UnixMilli(h.TimestampMs), Partition: h.Partition, Stale: h.Stale}
}

// QueryMiddleware wraps the handler QueryServer serves with mw, which sees
// every request before the API does: authentication and authorization (the
// weir CLI passes its broker's, which checks basic auth or client
// certificates and the ACLs), logging, limits. The requests other instances
// forward go through it too, so give QueryHTTPClient what they need to pass
// it (a client certificate, or a transport adding credentials).
// QueryHandler itself is not wrapped: wrap it where you mount it. Default:
// none.
func QueryMiddleware(mw func(http.Handler) http.Handler) Opt {
	return optFunc(func(c *config) { c.query.middleware = mw })
}

// serveQueries starts the QueryServer listener, if configured, and fixes the
// advertised endpoint. The returned function stops the server.
func (a *App) serveQueries() (stop func(), err error) {
	ep := a.cfg.query.advertised
	stop = func() {}
	if a.cfg.query.listen != "" {
		ln, err := net.Listen("tcp", a.cfg.query.listen)
		if err != nil {
			return nil, fmt.Errorf("query server: %w", err)
		}
		h := a.QueryHandler()
		if mw := a.cfg.query.middleware; mw != nil {
			h = mw(h)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.cfg.logger.Error("query server stopped", "err", err)
			}
		}()
		if ep == "" {
			ep = ln.Addr().String()
		}
		a.cfg.logger.Info("serving queries", "addr", ln.Addr().String(), "advertised", ep)
		stop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
			}
			<-done
			a.cfg.query.client.CloseIdleConnections()
		}
	} else {
		stop = a.cfg.query.client.CloseIdleConnections
	}
	a.query.mu.Lock()
	a.query.endpoint = ep
	a.query.mu.Unlock()
	return stop, nil
}
