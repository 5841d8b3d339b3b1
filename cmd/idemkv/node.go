package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/idemkv/idemkv/node"
)

func init() {
	register("node", "run one node (configured by a cassandra.yaml-like file and flags)", runNode)
}

func runNode(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (keys as in cassandra.yaml: data_directory, listen_address, seeds, num_tokens, dc, rack, commitlog_sync, ...)")
	dataDir := fs.String("data", "", "data directory (overrides data_directory)")
	listen := fs.String("listen", "", "listen address, e.g. 127.0.0.2 (overrides listen_address)")
	seeds := fs.String("seeds", "", "comma-separated seed addresses (overrides seeds)")
	syncMode := fs.String("commitlog-sync", "", "periodic, batch or group (overrides commitlog_sync)")
	leader := fs.String("counter-leader", "", "random (Cassandra's rule) or first: every table's leader rule unless the table sets its own (overrides counter_leader; default: random, and first for FBF tables)")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg node.Config
	if *cfgPath != "" {
		c, err := node.LoadConfig(*cfgPath)
		if err != nil {
			return err
		}
		cfg = c
	}
	if *dataDir != "" {
		cfg.DataDirectory = *dataDir
	}
	if *listen != "" {
		cfg.ListenAddress = *listen
	}
	if *seeds != "" {
		cfg.Seeds = strings.Split(*seeds, ",")
	}
	if *syncMode != "" {
		cfg.CommitLogSync = *syncMode
	}
	if *leader != "" {
		cfg.CounterLeader = *leader
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	n, err := node.Start(cfg, node.Options{Logger: logger})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "idemkv node %s up: peer %s, host id %s\n", n.Config().ListenAddress, n.Config().PeerAddr(), n.HostID())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	logger.Info("stopping", "signal", s.String())
	return n.Stop()
}
