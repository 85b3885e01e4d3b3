package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weirhq/weir/stream"
)

// weir describe APP: what a running stream application guarantees, read
// from the running system (DESIGN.md, guarantee reporting): its instances
// from its consumer group, its own statement (App.Describe) from the query
// API an instance advertises in the group, and the replay reach of the
// topics it reads from the cluster.

func newDescribeCmd() *cobra.Command {
	var output *outputFlag
	var cf *clientFlags
	cmd := &cobra.Command{
		Use:   "describe APP",
		Short: "Describe a running stream application: per topic, its guarantee and the mechanism behind it; its instances; the replay reach of its inputs",
		Long: `Describe a running weir stream application (APP is its application id, the name of its
consumer group), from the running system, on weir or any Kafka-compatible cluster:

  - its instances: the members of its group, what each is assigned, and the query API
    each advertises (stream.QueryServer / AdvertisedQueryEndpoint);
  - the application's own statement (App.Describe, from GET /v1/describe of the first
    instance's query API that answers): its sub-topologies and, per topic it writes, the
    delivery guarantee with the mechanism behind it, the ordering scope, its stores and
    their bounds, its watermark strategy, windows, lateness policies and where late
    records go;
  - the replay reach of every topic it reads (from the cluster's offsets, timestamps and
    retention, as weir topic describe).

An application that serves no query API is described from its group and topics only.
With --sasl-user the query API is asked with HTTP basic auth (as weir serve's HTTP
endpoints accept), and https endpoints are verified with --tls-ca.`,
		Example: `  weir describe surge
  weir describe surge -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, adm, err := cf.clientAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			d, err := describeApp(ctx, adm, cf, args[0])
			if err != nil {
				return err
			}
			rs, err := gatherReach(ctx, adm, d.details, d.Inputs)
			if err != nil {
				return err
			}
			admin := newAdminSource("", cf.brokers, cf.timeout)
			for _, t := range d.Inputs {
				rc, _ := rs.cfgs.On(t, nil)
				d.Reach = append(d.Reach, inputReach{Topic: t, Partitions: describeReach(ctx, adm, cl, d.details[t], rs.starts, rs.ends, rc, rs.sizes, admin)})
			}
			if output.json() {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			printApp(cmd.OutOrStdout(), d)
			return nil
		},
	}
	cf = addClientFlags(cmd)
	output = addOutputFlag(cmd)
	return cmd
}

// appDescription is `weir describe -o json`.
type appDescription struct {
	App       string        `json:"app"`
	State     string        `json:"state"` // the group's
	Instances []appInstance `json:"instances"`
	// Statement is App.Describe of the instance at StatementFrom (its
	// tasks' lines are that instance's); empty when no instance's query API
	// answered (StatementError says why).
	Statement      string       `json:"statement"`
	StatementFrom  string       `json:"statement_from,omitempty"`
	StatementError string       `json:"statement_error,omitempty"`
	Inputs         []string     `json:"inputs"`
	Reach          []inputReach `json:"replay_reach"`

	details kadm.TopicDetails
}

type appInstance struct {
	MemberID   string             `json:"member_id"`
	InstanceID string             `json:"instance_id,omitempty"`
	Host       string             `json:"host"`
	QueryURL   string             `json:"query_url,omitempty"` // "": serves no query API
	Assignment map[string][]int32 `json:"assignment"`
}

type inputReach struct {
	Topic      string           `json:"topic"`
	Partitions []partitionReach `json:"partitions"`
}

// describeApp reads the application's group, then its statement from the
// first instance whose query API answers.
func describeApp(ctx context.Context, adm *kadm.Client, cf *clientFlags, app string) (*appDescription, error) {
	ds, err := adm.DescribeGroups(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("describe group %q: %w", app, err)
	}
	g, ok := ds[app]
	switch {
	case !ok:
		return nil, fmt.Errorf("group %q: no answer from the cluster", app)
	case g.Err != nil:
		return nil, fmt.Errorf("group %q: %w%s", app, g.Err, detail(g.ErrMessage))
	case len(g.Members) == 0:
		return nil, fmt.Errorf("application %q has no running instance (its group is %s)", app, orDash(g.State))
	}
	d := &appDescription{App: app, State: g.State, Instances: []appInstance{}}
	inputs := map[string]bool{}
	var notApp error
	for _, m := range g.Members {
		cm, ok := m.Join.AsConsumer()
		if !ok {
			notApp = fmt.Errorf("member %s is not a consumer", m.MemberID)
			continue
		}
		url, err := stream.MemberQueryURL(cm.AppendTo(nil))
		if err != nil {
			notApp = fmt.Errorf("member %s: %w", m.MemberID, err)
			continue
		}
		in := appInstance{MemberID: m.MemberID, Host: m.ClientHost, QueryURL: url, Assignment: map[string][]int32{}}
		if m.InstanceID != nil {
			in.InstanceID = *m.InstanceID
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				in.Assignment[t.Topic] = slices.Sorted(slices.Values(t.Partitions))
			}
		}
		for _, t := range cm.Topics {
			inputs[t] = true
		}
		d.Instances = append(d.Instances, in)
	}
	if len(d.Instances) == 0 {
		return nil, fmt.Errorf("group %q is not a weir stream application's: %w", app, notApp)
	}
	slices.SortFunc(d.Instances, func(a, b appInstance) int { return strings.Compare(a.InstanceID+a.MemberID, b.InstanceID+b.MemberID) })

	d.Inputs = []string{}
	for t := range inputs {
		d.Inputs = append(d.Inputs, t)
	}
	slices.Sort(d.Inputs)
	if d.details, err = adm.ListTopics(ctx, d.Inputs...); err != nil {
		return nil, fmt.Errorf("describe topics: %w", err)
	}
	d.Inputs = slices.DeleteFunc(d.Inputs, func(t string) bool {
		td, ok := d.details[t]
		return !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition)
	})

	client, err := cf.httpClient()
	if err != nil {
		return nil, err
	}
	var errs []string
	for _, in := range d.Instances {
		if in.QueryURL == "" {
			continue
		}
		text, err := fetchStatement(ctx, client, cf, in.QueryURL)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		d.Statement, d.StatementFrom = text, in.QueryURL
		return d, nil
	}
	if len(errs) == 0 {
		d.StatementError = "no instance serves the query API (stream.QueryServer): the application's own statement is not available"
	} else {
		d.StatementError = strings.Join(errs, "; ")
	}
	return d, nil
}

// fetchStatement is GET base/v1/describe.
func fetchStatement(ctx context.Context, client *http.Client, cf *clientFlags, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/v1/describe", nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", base, err)
	}
	if cf.sec.saslUser != "" {
		req.SetBasicAuth(cf.sec.saslUser, cf.sec.password())
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", fmt.Errorf("%s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s/v1/describe: %s: %s", base, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// httpClient is the client for a stream application's query API: --timeout,
// and the TLS settings of the flags.
func (cf *clientFlags) httpClient() (*http.Client, error) {
	c := &http.Client{Timeout: cf.timeout}
	tc, err := cf.sec.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		c.Transport = tr
	}
	return c, nil
}

func printApp(w io.Writer, d *appDescription) {
	fmt.Fprintf(w, "application: %s\ngroup state: %s\ninstances:   %d\n\n", d.App, d.State, len(d.Instances))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tHOST\tQUERY API\tASSIGNMENT")
	for _, in := range d.Instances {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cmp.Or(in.InstanceID, in.MemberID), in.Host, orDash(in.QueryURL), formatAssignment(in.Assignment))
	}
	tw.Flush()
	fmt.Fprintln(w)
	if d.Statement != "" {
		note := ""
		if len(d.Instances) > 1 {
			note = " (the tasks and watermarks listed are that instance's)"
		}
		fmt.Fprintf(w, "# from %s/v1/describe%s\n%s", d.StatementFrom, note, d.Statement)
	} else {
		fmt.Fprintf(w, "# the application's statement: %s\n", d.StatementError)
	}
	for _, r := range d.Reach {
		fmt.Fprintf(w, "\nreplay reach of %s:\n", r.Topic)
		printReach(w, r.Partitions)
	}
}
