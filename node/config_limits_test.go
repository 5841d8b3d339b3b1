package node

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNativeTransportLimitKeys: the native transport limits are read under
// their cassandra.yaml-like keys, absent ones get their defaults and -1
// means no limit.
func TestNativeTransportLimitKeys(t *testing.T) {
	d, err := Config{DataDirectory: t.TempDir()}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if d.NativeTransportMaxFrameMB != 16 || d.NativeTransportMaxAuthMessageKB != 128 ||
		d.NativeTransportMaxConcurrentConnections != -1 || d.NativeTransportMaxConnectionsPerIP != -1 ||
		d.NativeTransportMaxRequestDataInFlightMB != 256 || d.NativeTransportMaxRequestDataPerIPMB != 64 ||
		d.NativeTransportReceiveQueueCapacityBytes != 1<<20 || d.NativeTransportMaxRequestsPerConnection != 1024 ||
		d.NativeTransportIdleTimeoutMS != 0 || d.NativeTransportHalfFrameTimeoutMS != 10000 || d.NativeTransportWriteTimeoutMS != 30000 {
		t.Errorf("defaults %+v", d)
	}
	path := filepath.Join(t.TempDir(), "idemkv.yaml")
	yaml := `data_directory: /tmp/x
native_transport_max_frame_size_in_mb: 8
native_transport_max_auth_message_size_in_kb: 64
native_transport_max_concurrent_connections: 1000
native_transport_max_concurrent_connections_per_ip: 100
native_transport_max_request_data_in_flight_in_mb: -1
native_transport_max_request_data_in_flight_per_ip_in_mb: 32
native_transport_receive_queue_capacity_in_bytes: 65536
native_transport_max_requests_per_connection: 512
native_transport_idle_timeout_in_ms: 60000
native_transport_half_frame_timeout_in_ms: 5000
native_transport_write_timeout_in_ms: -1
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, err = c.withDefaults(); err != nil {
		t.Fatal(err)
	}
	if c.NativeTransportMaxFrameMB != 8 || c.NativeTransportMaxAuthMessageKB != 64 ||
		c.NativeTransportMaxConcurrentConnections != 1000 || c.NativeTransportMaxConnectionsPerIP != 100 ||
		c.NativeTransportMaxRequestDataInFlightMB != -1 || c.NativeTransportMaxRequestDataPerIPMB != 32 ||
		c.NativeTransportReceiveQueueCapacityBytes != 65536 || c.NativeTransportMaxRequestsPerConnection != 512 ||
		c.NativeTransportIdleTimeoutMS != 60000 || c.NativeTransportHalfFrameTimeoutMS != 5000 || c.NativeTransportWriteTimeoutMS != -1 {
		t.Errorf("loaded %+v", c)
	}
	if mib(c.NativeTransportMaxRequestDataInFlightMB) != -1 || mib(32) != 32<<20 {
		t.Error("mib")
	}
}
