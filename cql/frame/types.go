// Package frame is the CQL native protocol (v4, and v3 where it differs) as
// Go values: the frame header, the body notation of the spec ([int],
// [string], [bytes], [value], [string map], ...), every request and response
// body a driver uses, and the types of result metadata. It does no I/O of its
// own beyond reading and writing frames on a given io.Reader/io.Writer.
//
// The types in this file are the contract between the server loop (package
// cql) and the statement executor (package cql/exec): the executor answers
// with these values, the codec puts them on the wire.
//
// # Body prefixes
//
// Header flags put optional prefixes before the message (Frame's fields):
//
//	request:  [bytes map: custom payload, flag 0x04]
//	          (the tracing flag 0x02 on a request adds no bytes: it asks
//	          for a trace)
//	response: [uuid: 16 bytes, the trace session id, flag 0x02]
//	          [string list: warnings, flag 0x08]
//	          [bytes map: custom payload, flag 0x04]
//
// in that order, then the message body. v3 has no warnings or custom
// payloads. The server answers a traced QUERY, PREPARE, EXECUTE or BATCH,
// RESULT or ERROR, with the trace id (package cql/trace).
//
// # Compressed bodies
//
// A connection's STARTUP may name a compression algorithm (option
// COMPRESSION, "lz4" or "snappy", as SUPPORTED lists them). From then on a
// frame whose header has the compression flag (0x01) carries its body
// compressed; the header's length is that of the compressed body, and the
// body decompresses to the bytes of the uncompressed frame body (tracing
// id, warnings, custom payload, message). The two formats, as protocol v4
// and Cassandra's Compressor define them (v5's compressed frame segments
// are another layout, not served here):
//
//	lz4:    [4 bytes: decompressed length, big-endian unsigned 32-bit]
//	        [LZ4 block format: sequences of token, literals, offset, match
//	         length; no LZ4 frame magic, no checksums]
//	snappy: the Snappy block format as it stands: [uvarint: decompressed
//	        length][literal and copy elements], not the framed (stream)
//	        format with its chunk headers and CRCs
//
// An empty body is compressed as lz4 00 00 00 00 00 (length 0, one empty
// token) and as snappy 00. Compress and CompressFrame write these formats,
// Decompress reads them, refusing a decompressed length over its limit from
// the length the body claims (the lz4 prefix, snappy's uvarint) before it
// allocates anything, and a body that does not decompress to exactly that
// length.
package frame

import "fmt"

// Opcode is a frame's message kind.
type Opcode byte

// The opcodes of protocol v4.
const (
	OpError         Opcode = 0x00
	OpStartup       Opcode = 0x01
	OpReady         Opcode = 0x02
	OpAuthenticate  Opcode = 0x03
	OpOptions       Opcode = 0x05
	OpSupported     Opcode = 0x06
	OpQuery         Opcode = 0x07
	OpResult        Opcode = 0x08
	OpPrepare       Opcode = 0x09
	OpExecute       Opcode = 0x0A
	OpRegister      Opcode = 0x0B
	OpEvent         Opcode = 0x0C
	OpBatch         Opcode = 0x0D
	OpAuthChallenge Opcode = 0x0E
	OpAuthResponse  Opcode = 0x0F
	OpAuthSuccess   Opcode = 0x10
)

// Consistency is a consistency level code, as the protocol and
// coordinator.ConsistencyLevel number them.
type Consistency uint16

// TypeID is a data type's option id in result metadata.
type TypeID uint16

// The data type ids of protocol v4.
const (
	TypeCustom    TypeID = 0x0000
	TypeASCII     TypeID = 0x0001
	TypeBigint    TypeID = 0x0002
	TypeBlob      TypeID = 0x0003
	TypeBoolean   TypeID = 0x0004
	TypeCounter   TypeID = 0x0005
	TypeDecimal   TypeID = 0x0006
	TypeDouble    TypeID = 0x0007
	TypeFloat     TypeID = 0x0008
	TypeInt       TypeID = 0x0009
	TypeTimestamp TypeID = 0x000B
	TypeUUID      TypeID = 0x000C
	TypeVarchar   TypeID = 0x000D
	TypeVarint    TypeID = 0x000E
	TypeTimeUUID  TypeID = 0x000F
	TypeInet      TypeID = 0x0010
	TypeDate      TypeID = 0x0011
	TypeTime      TypeID = 0x0012
	TypeSmallint  TypeID = 0x0013
	TypeTinyint   TypeID = 0x0014
	TypeList      TypeID = 0x0020
	TypeMap       TypeID = 0x0021
	TypeSet       TypeID = 0x0022
)

// DataType is a column's type: an id, the class name of a custom type, and
// the element types of a collection (one for list and set, two for map).
type DataType struct {
	ID     TypeID
	Custom string
	Elems  []DataType
}

// Simple types and collection constructors.
var (
	Text      = DataType{ID: TypeVarchar}
	Int       = DataType{ID: TypeInt}
	Bigint    = DataType{ID: TypeBigint}
	Blob      = DataType{ID: TypeBlob}
	Boolean   = DataType{ID: TypeBoolean}
	Counter   = DataType{ID: TypeCounter}
	UUID      = DataType{ID: TypeUUID}
	TimeUUID  = DataType{ID: TypeTimeUUID}
	Inet      = DataType{ID: TypeInet}
	Double    = DataType{ID: TypeDouble}
	Timestamp = DataType{ID: TypeTimestamp}
)

// ListOf, SetOf and MapOf build collection types.
func ListOf(e DataType) DataType   { return DataType{ID: TypeList, Elems: []DataType{e}} }
func SetOf(e DataType) DataType    { return DataType{ID: TypeSet, Elems: []DataType{e}} }
func MapOf(k, v DataType) DataType { return DataType{ID: TypeMap, Elems: []DataType{k, v}} }

// ColumnSpec is one column of result or bind-variable metadata.
type ColumnSpec struct {
	Keyspace, Table, Name string
	Type                  DataType
}

// Value is a bound value or a cell of a result row: bytes, null, or (v4
// bind values only) unset.
type Value struct {
	Bytes []byte
	Null  bool
	Unset bool
}

// QueryParams are the parameters of QUERY and EXECUTE (and, for the fields
// that apply, BATCH).
type QueryParams struct {
	Consistency       Consistency
	Values            []Value
	Names             []string // set when the values were sent with names
	SkipMetadata      bool
	PageSize          int32 // ≤ 0: no paging
	PagingState       []byte
	SerialConsistency Consistency
	HasSerial         bool
	Timestamp         int64
	HasTimestamp      bool
}

// BatchType is the kind of a BATCH.
type BatchType byte

// The batch types.
const (
	BatchLogged   BatchType = 0
	BatchUnlogged BatchType = 1
	BatchCounter  BatchType = 2
)

// BatchStatement is one statement of a BATCH: a query string or a prepared id.
type BatchStatement struct {
	Query      string
	PreparedID []byte
	Values     []Value
	Names      []string
}

// Batch is a BATCH request.
type Batch struct {
	Type              BatchType
	Statements        []BatchStatement
	Consistency       Consistency
	SerialConsistency Consistency
	HasSerial         bool
	Timestamp         int64
	HasTimestamp      bool
}

// Result is the body of a RESULT response: one of the *Result types below.
type Result interface{ resultKind() int32 }

// VoidResult is RESULT Void (kind 1).
type VoidResult struct{}

// RowsResult is RESULT Rows (kind 2). Columns is the metadata; it is sent
// unless NoMetadata (the client asked to skip it for a prepared statement).
type RowsResult struct {
	Columns     []ColumnSpec
	Rows        [][]Value
	PagingState []byte // non-nil when more pages follow
	NoMetadata  bool
}

// SetKeyspaceResult is RESULT Set_keyspace (kind 3).
type SetKeyspaceResult struct{ Keyspace string }

// PreparedResult is RESULT Prepared (kind 4).
type PreparedResult struct {
	ID            []byte
	Params        []ColumnSpec // bind variables
	PKIndexes     []uint16     // positions of the partition key's bind variables (token-aware routing)
	ResultColumns []ColumnSpec // nil for statements that return no rows
}

// SchemaChangeResult is RESULT Schema_change (kind 5), and the body of a
// SCHEMA_CHANGE event.
type SchemaChangeResult struct {
	Change   string // CREATED, UPDATED, DROPPED
	Target   string // KEYSPACE, TABLE
	Keyspace string
	Name     string // the table's name; "" for a keyspace
}

func (VoidResult) resultKind() int32         { return 1 }
func (RowsResult) resultKind() int32         { return 2 }
func (SetKeyspaceResult) resultKind() int32  { return 3 }
func (PreparedResult) resultKind() int32     { return 4 }
func (SchemaChangeResult) resultKind() int32 { return 5 }

// ErrorCode is a CQL error code.
type ErrorCode int32

// The error codes of protocol v4.
const (
	ErrServer          ErrorCode = 0x0000
	ErrProtocol        ErrorCode = 0x000A
	ErrBadCredentials  ErrorCode = 0x0100
	ErrUnavailable     ErrorCode = 0x1000
	ErrOverloaded      ErrorCode = 0x1001
	ErrIsBootstrapping ErrorCode = 0x1002
	ErrTruncate        ErrorCode = 0x1003
	ErrWriteTimeout    ErrorCode = 0x1100
	ErrReadTimeout     ErrorCode = 0x1200
	ErrReadFailure     ErrorCode = 0x1300
	ErrFunctionFailure ErrorCode = 0x1400
	ErrWriteFailure    ErrorCode = 0x1500
	ErrSyntax          ErrorCode = 0x2000
	ErrUnauthorized    ErrorCode = 0x2100
	ErrInvalid         ErrorCode = 0x2200
	ErrConfig          ErrorCode = 0x2300
	ErrAlreadyExists   ErrorCode = 0x2400
	ErrUnprepared      ErrorCode = 0x2500
)

// Error is an ERROR response. The fields after Message are the extra body
// of the codes that have one.
type Error struct {
	Code    ErrorCode
	Message string

	Consistency Consistency // Unavailable, WriteTimeout, ReadTimeout
	Required    int32       // Unavailable
	Alive       int32       // Unavailable
	Received    int32       // WriteTimeout, ReadTimeout
	BlockFor    int32       // WriteTimeout, ReadTimeout
	WriteType   string      // WriteTimeout: "COUNTER" for counter writes
	DataPresent bool        // ReadTimeout
	Keyspace    string      // AlreadyExists
	Table       string      // AlreadyExists ("" for a keyspace)
	UnknownID   []byte      // Unprepared

	NumFailures int32    // ReadFailure, WriteFailure (v4); DataPresent and WriteType as above
	Function    string   // FunctionFailure, with Keyspace
	ArgTypes    []string // FunctionFailure
}

func (e *Error) Error() string { return fmt.Sprintf("cql error 0x%04x: %s", int32(e.Code), e.Message) }

// Errorf builds an Error of a code without extra body.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Event is an EVENT pushed to registered connections.
type Event struct {
	Type   string // TOPOLOGY_CHANGE, STATUS_CHANGE, SCHEMA_CHANGE
	Change string // NEW_NODE, REMOVED_NODE, MOVED_NODE; UP, DOWN; or (schema) CREATED, UPDATED, DROPPED
	IP     []byte // node address (4 or 16 bytes) for topology and status events
	Port   int32
	Schema SchemaChangeResult // for SCHEMA_CHANGE
}

// Types that only appear in metadata decoded from elsewhere: tuples carry
// their element types in Elems; user-defined types are not supported.
const (
	TypeUDT   TypeID = 0x0030
	TypeTuple TypeID = 0x0031
)
