package main

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicConfigDocs returns the documentation of every config of topics
// (DescribeConfigs with IncludeDocumentation; kadm does not ask for it), by
// topic then config name. weir states there which configs it accepts but
// does not enforce. Missing on any error: the notes are optional.
func topicConfigDocs(ctx context.Context, cl *kgo.Client, topics []string) map[string]map[string]string {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	for _, t := range topics {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, t
		req.Resources = append(req.Resources, rr)
	}
	docs := map[string]map[string]string{}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return docs
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			continue
		}
		m := map[string]string{}
		for _, c := range r.Configs {
			if c.Documentation != nil {
				m[c.Name] = configNote(*c.Documentation)
			}
		}
		docs[r.ResourceName] = m
	}
	return docs
}

// configNote shortens a config's documentation for a table cell: its first
// sentence, at most 160 characters (weir's are one short sentence; Kafka's
// run to paragraphs).
func configNote(doc string) string {
	doc = strings.Join(strings.Fields(doc), " ")
	if i := strings.Index(doc, ". "); i >= 0 {
		doc = doc[:i+1]
	}
	if utf8.RuneCountInString(doc) > 160 {
		doc = string([]rune(doc)[:159]) + "…"
	}
	return doc
}
