package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/schema"
	"github.com/idemkv/idemkv/transport"
)

// schemaRequest is a client's schema change.
type schemaRequest struct {
	Op       string           `json:"op"` // create_keyspace, create_table
	Keyspace schema.Keyspace  `json:"keyspace,omitempty"`
	Table    coltype.TableDef `json:"table,omitempty"`
}

func (n *Node) applySchemaRequest(r schemaRequest) error {
	switch r.Op {
	case "create_keyspace":
		return n.schema.CreateKeyspace(r.Keyspace, true)
	case "create_table":
		return n.schema.CreateTable(r.Table, true)
	}
	return fmt.Errorf("unknown schema operation %q", r.Op)
}

// Client talks to nodes over the peer protocol: the node that receives a
// request coordinates it. It is the harness of tests and benchmarks that run
// real node processes; applications use CQL.
type Client struct {
	tr transport.Transport
}

// NewClient opens a client endpoint on an ephemeral loopback port.
func NewClient() (*Client, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	tr, err := transport.ListenTCP(transport.Addr(addr), func(context.Context, transport.Addr, transport.Message) (transport.Message, error) {
		return transport.Message{}, errors.New("a client serves no requests")
	}, transport.TCPOptions{})
	if err != nil {
		return nil, err
	}
	return &Client{tr: tr}, nil
}

// Close closes the client's endpoint.
func (c *Client) Close() error { return c.tr.Close() }

// Write asks the node at addr to coordinate a counter update.
func (c *Client) Write(ctx context.Context, addr string, cl coordinator.ConsistencyLevel, u coltype.Update) error {
	resp, err := c.tr.Request(ctx, transport.Addr(addr), transport.Message{Type: TypeClientWrite, Body: coordinator.EncodeWriteRequest(cl, u)})
	if err != nil {
		return err
	}
	return coordinator.DecodeResult(resp.Body)
}

// Read asks the node at addr to coordinate a read of a partition.
func (c *Client) Read(ctx context.Context, addr string, cl coordinator.ConsistencyLevel, table uint64, key []byte) (row.Row, bool, error) {
	resp, err := c.tr.Request(ctx, transport.Addr(addr), transport.Message{Type: TypeClientRead, Body: coordinator.EncodeReadRequest(cl, table, key)})
	if err != nil {
		return row.Row{}, false, err
	}
	return coordinator.DecodeReadResult(row.Key{Token: ring.Token(key), Partition: key}, resp.Body)
}

// CreateKeyspace creates a keyspace (if it does not exist) through addr.
func (c *Client) CreateKeyspace(ctx context.Context, addr string, k schema.Keyspace) error {
	return c.schema(ctx, addr, schemaRequest{Op: "create_keyspace", Keyspace: k})
}

// CreateTable creates a table (if it does not exist) through addr.
func (c *Client) CreateTable(ctx context.Context, addr string, t coltype.TableDef) error {
	return c.schema(ctx, addr, schemaRequest{Op: "create_table", Table: t})
}

func (c *Client) schema(ctx context.Context, addr string, r schemaRequest) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = c.tr.Request(ctx, transport.Addr(addr), transport.Message{Type: TypeClientSchema, Body: b})
	return err
}

// Status returns the node's view of the ring.
func (c *Client) Status(ctx context.Context, addr string) ([]PeerStatus, error) {
	resp, err := c.tr.Request(ctx, transport.Addr(addr), transport.Message{Type: TypeStatus})
	if err != nil {
		return nil, err
	}
	var out []PeerStatus
	return out, json.Unmarshal(resp.Body, &out)
}
