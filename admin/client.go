package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Client calls a node's admin endpoint (what `idemkv nodetool` uses).
type Client struct {
	// Addr is the endpoint's host:port.
	Addr string
	// HTTP is the client used; nil means one with a 30 s timeout (a
	// flush or a compaction of a large table may take longer: give a
	// client without a timeout and bound the context instead).
	HTTP *http.Client
}

// UnreachableError is returned when the endpoint cannot be reached.
type UnreachableError struct {
	Addr string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the admin endpoint of %s: %v (is the node running, with its admin endpoint on that port?)", e.Addr, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// StatusError is an error answer of the endpoint.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Msg, e.Code) }

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

func (c *Client) call(ctx context.Context, method, path string, q url.Values, out any) error {
	u := url.URL{Scheme: "http", Host: c.Addr, Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return &UnreachableError{Addr: c.Addr, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("admin: read the answer of %s: %w", c.Addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e apiError
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = http.StatusText(resp.StatusCode)
		}
		return &StatusError{Code: resp.StatusCode, Msg: e.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("admin: decode the answer of %s%s: %w", c.Addr, path, err)
	}
	return nil
}

func values(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}

// Info describes the node.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var out Info
	return out, c.call(ctx, http.MethodGet, "/api/v1/info", nil, &out)
}

// Status is the ring as the node sees it; with a keyspace (not ""), Owns
// is each node's effective ownership of the keyspace's data.
func (c *Client) Status(ctx context.Context, keyspace string) ([]Peer, error) {
	var out []Peer
	return out, c.call(ctx, http.MethodGet, "/api/v1/status", values("keyspace", keyspace), &out)
}

// TableStats are the node's tables' statistics (all tables when keyspace
// is "", a keyspace's when table is "").
func (c *Client) TableStats(ctx context.Context, keyspace, table string) ([]TableStats, error) {
	var out []TableStats
	return out, c.call(ctx, http.MethodGet, "/api/v1/tablestats", values("keyspace", keyspace, "table", table), &out)
}

// DescribeRing is a keyspace's token ranges and replicas.
func (c *Client) DescribeRing(ctx context.Context, keyspace string) (Ring, error) {
	var out Ring
	return out, c.call(ctx, http.MethodGet, "/api/v1/describering", values("keyspace", keyspace), &out)
}

// Endpoints are the replicas of a partition key (given as text).
func (c *Client) Endpoints(ctx context.Context, keyspace, table, key string) ([]Endpoint, error) {
	var out []Endpoint
	q := values("keyspace", keyspace, "table", table)
	q.Set("key", key)
	return out, c.call(ctx, http.MethodGet, "/api/v1/getendpoints", q, &out)
}

// Flush flushes memtables to SSTables (all tables when keyspace is "").
func (c *Client) Flush(ctx context.Context, keyspace, table string) error {
	return c.call(ctx, http.MethodPost, "/api/v1/flush", values("keyspace", keyspace, "table", table), nil)
}

// Compact runs a major compaction (all tables when keyspace is "").
func (c *Client) Compact(ctx context.Context, keyspace, table string) error {
	return c.call(ctx, http.MethodPost, "/api/v1/compact", values("keyspace", keyspace, "table", table), nil)
}

// Decommission makes the node stream its ranges to the nodes that take
// them over and leave the ring for good; it answers once the node has left
// (it takes as long as the streaming: give a client without a timeout).
func (c *Client) Decommission(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/api/v1/decommission", nil, nil)
}

// Drain flushes every table, stops serving CQL and leaves the ring; the
// process stays up until it is stopped.
func (c *Client) Drain(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/api/v1/drain", nil, nil)
}
