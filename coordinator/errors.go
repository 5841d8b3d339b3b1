package coordinator

import (
	"errors"
	"fmt"

	"github.com/idemkv/idemkv/coltype"
)

// UnavailableError: not enough live replicas for the consistency level; the
// request was not attempted.
type UnavailableError struct {
	CL       ConsistencyLevel
	Required int
	Alive    int
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("Cannot achieve consistency level %s (required %d, alive %d)", e.CL, e.Required, e.Alive)
}

// WriteType is the native protocol's write type of a write timeout.
type WriteType string

// WriteTypeCounter is the write type of every counter write, batched or not.
const WriteTypeCounter WriteType = "COUNTER"

// WriteTimeoutError: the write did not gather enough acknowledgements in
// time. For counters the outcome is unknown: the leader may have applied it.
type WriteTimeoutError struct {
	CL        ConsistencyLevel
	Received  int
	BlockFor  int
	WriteType WriteType
}

func (e *WriteTimeoutError) Error() string {
	return fmt.Sprintf("Operation timed out - received only %d responses (%s, %s write, %d required)", e.Received, e.CL, e.WriteType, e.BlockFor)
}

// ReadTimeoutError: the read did not gather enough answers in time.
type ReadTimeoutError struct {
	CL          ConsistencyLevel
	Received    int
	BlockFor    int
	DataPresent bool
}

func (e *ReadTimeoutError) Error() string {
	return fmt.Sprintf("Operation timed out - received only %d responses (%s read, %d required)", e.Received, e.CL, e.BlockFor)
}

// InvalidError: the request is not valid (Cassandra's Invalid error).
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// Is makes an UnavailableError a coltype.ErrUnavailable (for the
// coordinator-side logic of column types, coltype.Coordination).
func (e *UnavailableError) Is(target error) bool { return target == coltype.ErrUnavailable }

// Is makes a WriteTimeoutError a coltype.ErrTimedOut.
func (e *WriteTimeoutError) Is(target error) bool { return target == coltype.ErrTimedOut }

// Is makes an InvalidError a coltype.ErrRefused.
func (e *InvalidError) Is(target error) bool { return target == coltype.ErrRefused }

// WriteFailureError: enough replicas answered the write with an error
// that the consistency level cannot be met (the native protocol's
// WRITE_FAILURE). Unlike a timeout, the coordinator answers as soon as too
// many replicas have failed. Failures counts them; FailedReplicas names
// them (their peer addresses, or host ids), for logs: protocol v4 sends
// only the count (v5's reason map is not spoken by idemkv's frame layer).
type WriteFailureError struct {
	CL             ConsistencyLevel
	Received       int
	BlockFor       int
	Failures       int
	FailedReplicas []string
	WriteType      WriteType
}

func (e *WriteFailureError) Error() string {
	return fmt.Sprintf("Operation failed - received %d responses and %d failures (%s, %s write, %d required)",
		e.Received, e.Failures, e.CL, e.WriteType, e.BlockFor)
}

// errWritesRefused is a replica's answer to a mutation of a table whose
// writes the node refuses (Config.RefuseWrites, the test hook of
// Cassandra's cassandra.test.fail_writes_ks). Its text is what a
// coordinator recognises in a peer's *transport.RemoteError.
var errWritesRefused = errors.New(writesRefusedMsg)

const writesRefusedMsg = "coordinator: writes to this table are refused on this replica (test_fail_writes_keyspace)"
