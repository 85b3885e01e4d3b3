// Package orders is the orders application of the stream library's README:
// orders re-keyed by customer and enriched from a customers table, a running
// total of spend per customer and a count of orders per category, with
// malformed orders in the App's dead-letter topic. It is written as a Kafka
// Streams user would write it; its tests run it with streamtest (no broker),
// against a real weir broker (weirtest) under both delivery guarantees, and
// as a real process killed with SIGKILL and restarted while orders arrive
// (exact totals under ExactlyOnce, none below the truth under AtLeastOnce).
package orders

import (
	"errors"

	"github.com/weirhq/weir/stream"
)

// Topics the application reads and writes. The App creates its internal
// topics (repartition, changelog, "orders-app.dlq") itself.
const (
	AppID            = "orders-app"
	OrdersTopic      = "orders"    // key: order id; value: Order as JSON
	CustomersTopic   = "customers" // compacted; key: customer id; value: Customer as JSON
	SpendTopic       = "spend-per-customer"
	PerCategoryTopic = "orders-per-category"
)

// Order is one order.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Category string `json:"category"`
	Amount   int64  `json:"amount"` // cents
}

// Customer is a customers table value.
type Customer struct {
	Name string `json:"name"`
	Tier string `json:"tier"`
}

// Spend is the running total of one customer.
type Spend struct {
	Customer string `json:"customer"`
	Tier     string `json:"tier"`
	Orders   int64  `json:"orders"`
	Total    int64  `json:"total"`
}

// ErrMalformed marks an order without customer, category or a positive
// amount: it goes to the dead-letter topic at once (stream.Permanent).
var ErrMalformed = errors.New("orders: malformed order")

// Build declares the topology.
func Build(b *stream.Builder) {
	orders := stream.From(b, OrdersTopic, stream.String(), stream.JSON[Order]()).
		Filter(func(r stream.Record[string, Order]) (bool, error) {
			o := r.Value
			if o.Customer == "" || o.Category == "" || o.Amount <= 0 {
				return false, stream.Permanent(ErrMalformed)
			}
			return true, nil
		}, stream.Named("validate"))
	customers := stream.FromTable(b, CustomersTopic, stream.String(), stream.JSON[Customer](), "customers")

	byCustomer := stream.KeyBy(orders, func(r stream.Record[string, Order]) (string, error) { return r.Value.Customer, nil })
	enriched := stream.LeftJoin(byCustomer, customers,
		func(r stream.Record[string, Order], c Customer, _ bool) (Spend, error) {
			return Spend{Customer: r.Key, Tier: c.Tier, Orders: 1, Total: r.Value.Amount}, nil
		})
	stream.Reduce(stream.GroupByKey(enriched), stream.StoreConfig{Name: "spend", NoExpiry: "one key per customer"},
		func(sum, o Spend) (Spend, error) {
			return Spend{Customer: o.Customer, Tier: o.Tier, Orders: sum.Orders + 1, Total: sum.Total + o.Total}, nil
		}).ToStream().To(SpendTopic, stream.String(), stream.JSON[Spend]())

	stream.Count(stream.GroupBy(orders, func(r stream.Record[string, Order]) (string, error) { return r.Value.Category, nil }),
		stream.StoreConfig{Name: "per-category", NoExpiry: "categories are a short fixed list"}).
		ToStream().To(PerCategoryTopic, stream.String(), stream.Int64())
}
