package registry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// BenchmarkGetSchemaByID measures GET /schemas/ids/{id} (served from memory)
// against a trivial net/http handler writing a body of the same size, both
// over loopback HTTP with one keep-alive client, in the same run. It
// reports the registry's requests per second as a ratio of the baseline's
// (target >= 0.5).
func BenchmarkGetSchemaByID(b *testing.B) {
	tr := startRegistry(b)
	s, err := tr.client.CreateSchema(ctxT(b), "bench-value", sr.Schema{Schema: avroV2})
	if err != nil {
		b.Fatal(err)
	}
	url := tr.srv.URL + "/schemas/ids/" + strconv.Itoa(s.ID)
	body := get(b, http.DefaultClient, url)

	trivial := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer trivial.Close()

	// Rounds alternate between the two servers and the best round of each
	// counts, so a noisy neighbour on the machine hits both alike.
	const requests = 2000
	newClient := func() *http.Client {
		return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	}
	regCl, baseCl := newClient(), newClient()
	defer regCl.CloseIdleConnections()
	defer baseCl.CloseIdleConnections()
	round := func(cl *http.Client, u string) float64 {
		start := time.Now()
		for range requests {
			get(b, cl, u)
		}
		return requests / time.Since(start).Seconds()
	}
	var reg, base float64
	for b.Loop() {
		for range 5 {
			base = max(base, round(baseCl, trivial.URL))
			reg = max(reg, round(regCl, url))
		}
	}
	b.ReportMetric(reg, "registry-req/s")
	b.ReportMetric(base, "trivial-req/s")
	b.ReportMetric(reg/base, "ratio")
}

func get(b testing.TB, cl *http.Client, url string) []byte {
	resp, err := cl.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return body
}
