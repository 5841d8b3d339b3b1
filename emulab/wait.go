package emulab

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/idemkv/idemkv/node"
)

// WaitRing asks every peer (ip:storage_port) for its view of the ring over
// the peer protocol until each one sees every peer up, or ctx ends. It
// writes a line to log whenever the picture changes.
func WaitRing(ctx context.Context, peers []string, log io.Writer) error {
	if len(peers) == 0 {
		return fmt.Errorf("emulab: wait: no peers")
	}
	client, err := node.NewClient()
	if err != nil {
		return fmt.Errorf("emulab: wait: %w", err)
	}
	defer client.Close()
	start := time.Now()
	last := ""
	for {
		var parts []string
		ready := true
		for _, p := range peers {
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			view, err := client.Status(qctx, p)
			cancel()
			if err != nil {
				ready = false
				parts = append(parts, p+" not answering")
				continue
			}
			var up []string
			for _, s := range view {
				if s.Up {
					up = append(up, s.Addr)
				}
			}
			missing := 0
			for _, q := range peers {
				if !slices.Contains(up, q) {
					missing++
				}
			}
			if missing > 0 {
				ready = false
			}
			parts = append(parts, fmt.Sprintf("%s sees %d/%d up", p, len(peers)-missing, len(peers)))
		}
		if line := strings.Join(parts, ", "); line != last {
			fmt.Fprintf(log, "%5.1fs %s\n", time.Since(start).Seconds(), line)
			last = line
		}
		if ready {
			fmt.Fprintf(log, "ring of %d nodes up after %.1fs\n", len(peers), time.Since(start).Seconds())
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("emulab: ring not up after %s: %s: %w", time.Since(start).Round(time.Second), last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
