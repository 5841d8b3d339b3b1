package frame

import (
	"fmt"
)

// Message is the body of a frame, one type per opcode: the request types
// below (*Startup, *Options, *Query, *Prepare, *Execute, *Batch, *Register,
// *AuthResponse) and the responses (*Error, *Ready, *Authenticate,
// *Supported, the Result kinds, *Event, *AuthChallenge, *AuthSuccess).
// Encoders accept the Result kinds and *Event both as values and pointers;
// decoders return pointers.
type Message interface{ Opcode() Opcode }

// Startup is a STARTUP request: CQL_VERSION, DRIVER_NAME, COMPRESSION, ...
type Startup struct{ Options map[string]string }

// Options is an OPTIONS request (empty body).
type Options struct{}

// Query is a QUERY request.
type Query struct {
	Query  string
	Params QueryParams
}

// Prepare is a PREPARE request (v4: only the query string).
type Prepare struct{ Query string }

// Execute is an EXECUTE request.
type Execute struct {
	ID     []byte
	Params QueryParams
}

// Register is a REGISTER request: the event types wanted.
type Register struct{ Events []string }

// AuthResponse is an AUTH_RESPONSE request: the authenticator's token
// (for PasswordAuthenticator "\x00user\x00password").
type AuthResponse struct{ Token []byte }

// Ready is a READY response.
type Ready struct{}

// Authenticate is an AUTHENTICATE response naming the authenticator class.
type Authenticate struct{ Authenticator string }

// Supported is a SUPPORTED response.
type Supported struct{ Options map[string][]string }

// AuthChallenge is an AUTH_CHALLENGE response.
type AuthChallenge struct{ Token []byte }

// AuthSuccess is an AUTH_SUCCESS response; Token may be nil.
type AuthSuccess struct{ Token []byte }

func (*Startup) Opcode() Opcode { return OpStartup }

// Opcode of Options.
func (*Options) Opcode() Opcode { return OpOptions }

// Opcode of Query.
func (*Query) Opcode() Opcode { return OpQuery }

// Opcode of Prepare.
func (*Prepare) Opcode() Opcode { return OpPrepare }

// Opcode of Execute.
func (*Execute) Opcode() Opcode { return OpExecute }

// Opcode of Register.
func (*Register) Opcode() Opcode { return OpRegister }

// Opcode of AuthResponse.
func (*AuthResponse) Opcode() Opcode { return OpAuthResponse }

// Opcode of a BATCH request.
func (*Batch) Opcode() Opcode { return OpBatch }

// Opcode of Ready.
func (*Ready) Opcode() Opcode { return OpReady }

// Opcode of Authenticate.
func (*Authenticate) Opcode() Opcode { return OpAuthenticate }

// Opcode of Supported.
func (*Supported) Opcode() Opcode { return OpSupported }

// Opcode of AuthChallenge.
func (*AuthChallenge) Opcode() Opcode { return OpAuthChallenge }

// Opcode of AuthSuccess.
func (*AuthSuccess) Opcode() Opcode { return OpAuthSuccess }

// Opcode of an ERROR response.
func (*Error) Opcode() Opcode { return OpError }

// Opcode of an EVENT.
func (Event) Opcode() Opcode { return OpEvent }

// Opcode of a RESULT.
func (VoidResult) Opcode() Opcode { return OpResult }

// Opcode of a RESULT.
func (RowsResult) Opcode() Opcode { return OpResult }

// Opcode of a RESULT.
func (SetKeyspaceResult) Opcode() Opcode { return OpResult }

// Opcode of a RESULT.
func (PreparedResult) Opcode() Opcode { return OpResult }

// Opcode of a RESULT.
func (SchemaChangeResult) Opcode() Opcode { return OpResult }

// IsRequest reports whether op is sent by clients, and IsResponse whether
// by servers. An opcode outside the protocol is neither.
func (op Opcode) IsRequest() bool {
	switch op {
	case OpStartup, OpOptions, OpQuery, OpPrepare, OpExecute, OpRegister, OpBatch, OpAuthResponse:
		return true
	}
	return false
}

// IsResponse reports whether op is sent by servers.
func (op Opcode) IsResponse() bool {
	switch op {
	case OpError, OpReady, OpAuthenticate, OpSupported, OpResult, OpEvent, OpAuthChallenge, OpAuthSuccess:
		return true
	}
	return false
}

var opNames = [...]string{
	OpError: "ERROR", OpStartup: "STARTUP", OpReady: "READY", OpAuthenticate: "AUTHENTICATE",
	0x04: "", OpOptions: "OPTIONS", OpSupported: "SUPPORTED", OpQuery: "QUERY", OpResult: "RESULT",
	OpPrepare: "PREPARE", OpExecute: "EXECUTE", OpRegister: "REGISTER", OpEvent: "EVENT",
	OpBatch: "BATCH", OpAuthChallenge: "AUTH_CHALLENGE", OpAuthResponse: "AUTH_RESPONSE",
	OpAuthSuccess: "AUTH_SUCCESS",
}

// String is the opcode's name in the spec.
func (op Opcode) String() string {
	if int(op) < len(opNames) && opNames[op] != "" {
		return opNames[op]
	}
	return fmt.Sprintf("OPCODE(0x%02x)", byte(op))
}

// Frame is a whole frame: the header fields a caller chooses, the optional
// prefixes of the body, and the message.
type Frame struct {
	Version byte  // protocol version, without the direction bit (3 or 4)
	Stream  int16 // -1 for events
	// Tracing: on a request, the client asks for tracing (no body bytes);
	// on a response, TracingID (16 bytes) is sent and the flag set.
	Tracing   bool
	TracingID []byte
	// Warnings (responses, v4) and Payload (v4, both directions) are sent
	// when non-empty, respectively non-nil: an empty non-nil payload is sent
	// as an empty [bytes map], as a mirror of the request must.
	Warnings []string
	Payload  map[string][]byte
	Message  Message
}

// AppendFrame appends f, header and body, to dst. The direction bit and
// the flags follow from the message and the fields. In v3, which has no
// custom payloads or warnings, those are left out.
func AppendFrame(dst []byte, f *Frame) ([]byte, error) {
	op := f.Message.Opcode()
	h := Header{Version: f.Version, Stream: f.Stream, Op: op}
	if op.IsResponse() {
		h.Version |= ResponseBit
	}
	start := len(dst)
	e := encoder{b: AppendHeader(dst, h)}
	var flags byte
	if op.IsResponse() {
		if f.TracingID != nil {
			flags |= FlagTracing
			e.uuid(f.TracingID)
		}
		if len(f.Warnings) > 0 && f.Version >= Version4 {
			flags |= FlagWarning
			e.stringList(f.Warnings)
		}
	} else if f.Tracing {
		flags |= FlagTracing
	}
	if f.Payload != nil && f.Version >= Version4 {
		flags |= FlagCustomPayload
		e.bytesMap(f.Payload)
	}
	if err := encodeMessage(&e, f.Version, f.Message); err != nil {
		return dst[:start], err
	}
	if e.err != nil {
		return dst[:start], e.err
	}
	n := len(e.b) - start - h.Size()
	if n > maxInt32 {
		return dst[:start], fmt.Errorf("frame: body of %d bytes", n)
	}
	h.Flags = flags
	h.Length = int32(n)
	AppendHeader(e.b[:start], h)
	return e.b, nil
}

const maxInt32 = 1<<31 - 1

// DecodeFrame decodes a frame's body, read by a Reader with header h, in
// either direction. Byte slices in the result (values, ids, payload values)
// alias body. Errors wrap ErrMalformed, except for an opcode that does not
// exist or does not belong to the direction of the version byte. A body
// with the compression flag is refused: the caller decompresses it first
// (Decompress) and clears the flag.
func DecodeFrame(h Header, body []byte) (*Frame, error) {
	v := h.ProtoVersion()
	f := &Frame{Version: v, Stream: h.Stream}
	if h.IsResponse() && !h.Op.IsResponse() || !h.IsResponse() && !h.Op.IsRequest() {
		if !h.Op.IsRequest() && !h.Op.IsResponse() {
			//lint:ignore ST1005 Cassandra's own message, which drivers show
			return f, fmt.Errorf("Unknown opcode %d", byte(h.Op))
		}
		want, got := "REQUEST", "RESPONSE"
		if !h.IsResponse() {
			want, got = got, want
		}
		//lint:ignore ST1005 Cassandra's own message, which drivers show
		return f, fmt.Errorf("Wrong protocol direction (expected %s, got %s) for opcode %d (%s)", want, got, byte(h.Op), h.Op)
	}
	if h.Flags&FlagCompression != 0 {
		return f, fmt.Errorf("%w: compressed frame, but no compression was negotiated", ErrMalformed)
	}
	d := decoder{b: body}
	if h.IsResponse() {
		if h.Flags&FlagTracing != 0 {
			f.TracingID = d.uuid("tracing id")
		}
		if h.Flags&FlagWarning != 0 && v >= Version4 {
			f.Warnings = d.stringList("warnings")
		}
	} else {
		f.Tracing = h.Flags&FlagTracing != 0
	}
	if h.Flags&FlagCustomPayload != 0 && v >= Version4 {
		f.Payload = d.bytesMap("custom payload")
	}
	if d.err != nil {
		return f, d.err
	}
	m, err := decodeMessage(&d, v, h.Op)
	if err != nil {
		return f, err
	}
	f.Message = m
	return f, nil
}

// DecodeMessage decodes a message body without prefixes (no payload,
// warnings or tracing id) of opcode op in protocol version v.
func DecodeMessage(v byte, op Opcode, body []byte) (Message, error) {
	d := decoder{b: body}
	return decodeMessage(&d, v, op)
}

func decodeMessage(d *decoder, v byte, op Opcode) (Message, error) {
	var m Message
	switch op {
	case OpStartup:
		m = &Startup{Options: d.stringMap("startup options")}
	case OpOptions:
		m = &Options{}
	case OpQuery:
		q := &Query{Query: d.longString("query")}
		q.Params = d.queryParams(v)
		m = q
	case OpPrepare:
		m = &Prepare{Query: d.longString("query")}
	case OpExecute:
		x := &Execute{ID: d.shortBytes("prepared id")}
		x.Params = d.queryParams(v)
		m = x
	case OpBatch:
		m = decodeBatch(d, v)
	case OpRegister:
		m = &Register{Events: d.stringList("event types")}
	case OpAuthResponse:
		m = &AuthResponse{Token: d.bytes_("auth token")}
	case OpError:
		m = decodeError(d, v)
	case OpReady:
		m = &Ready{}
	case OpAuthenticate:
		m = &Authenticate{Authenticator: d.string_("authenticator")}
	case OpSupported:
		m = &Supported{Options: d.stringMultimap("supported options")}
	case OpResult:
		m = decodeResult(d, v)
	case OpEvent:
		m = decodeEvent(d)
	case OpAuthChallenge:
		m = &AuthChallenge{Token: d.bytes_("auth token")}
	case OpAuthSuccess:
		m = &AuthSuccess{Token: d.bytes_("auth token")}
	default:
		//lint:ignore ST1005 Cassandra's own message, which drivers show
		return nil, fmt.Errorf("Unknown opcode %d", byte(op))
	}
	// Trailing bytes are ignored, as Cassandra does.
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

func encodeMessage(e *encoder, v byte, m Message) error {
	switch m := m.(type) {
	case *Startup:
		e.stringMap(m.Options)
	case *Options, *Ready:
	case *Query:
		e.longString(m.Query)
		e.queryParams(v, &m.Params)
	case *Prepare:
		e.longString(m.Query)
	case *Execute:
		e.shortBytes(m.ID)
		e.queryParams(v, &m.Params)
	case *Batch:
		e.batch(v, m)
	case *Register:
		e.stringList(m.Events)
	case *AuthResponse:
		e.bytes_(m.Token)
	case *Error:
		e.error_(v, m)
	case *Authenticate:
		e.string_(m.Authenticator)
	case *Supported:
		e.stringMultimap(m.Options)
	case *AuthChallenge:
		e.bytes_(m.Token)
	case *AuthSuccess:
		e.bytes_(m.Token)
	case Event:
		e.event(&m)
	case *Event:
		e.event(m)
	case Result:
		return e.result(v, m)
	default:
		return fmt.Errorf("frame: cannot encode %T", m)
	}
	return nil
}
