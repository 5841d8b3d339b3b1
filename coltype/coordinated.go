package coltype

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/idemkv/idemkv/counters"
)

// Coordinated is the capability of Exchanger types that bring their own
// coordinator-side logic: the coordinator that receives a client's
// exchange (a custom payload, see Exchanger) or a plain CQL `c = c + n`
// for a column of the type hands it to the type, with a Coordination that
// names the cell's replicas and exchanges payloads with them. The type may
// rewrite the request (handoff counters set the servers of a retirement
// notice), choose and order the replicas (handoff: those the client holds
// tokens for first), and serve a plain update by acting as a temporary
// client itself (handoff: a tier-1 participant for the one request,
// retired in the background if it may have left state behind).
//
// An Exchanger without it is served by the coordinator's defaults: a
// DirectExchanger's payload goes unchanged to the replicas (see
// DirectExchanger), another Exchanger's to one live natural replica, the
// first in ring order, then the next ones on failure; a plain update is led
// (Leading) or refused (ErrNotLed).
//
// The methods run on the coordinator, which need not be a replica of the
// key. The errors they return reach the client: those of the Coordination
// (Refused, TimedOut, and the Exchange errors) carry their CQL error, any
// other is a server error.
type Coordinated interface {
	// CoordinateExchange serves a client's exchange payload for the
	// Coordination's cell and returns the answer to put in the response's
	// custom payload (under PayloadKey).
	CoordinateExchange(ctx context.Context, c Coordination, payload []byte) ([]byte, error)
	// CoordinateWrite serves a plain update of the cell by delta (already
	// checked by CQL.CheckDelta, when the type has it), for a client that
	// sent no payload (a driver without the design's client helper).
	CoordinateWrite(ctx context.Context, c Coordination, delta int64) error
}

// Coordination is the coordinator as a Coordinated type sees it, for one
// cell and one client request.
type Coordination interface {
	// Cell is the cell the request is for.
	Cell() CellRef
	// Natural is the cell's natural replicas (host ids) in ring order;
	// Live the ones among them the failure detector holds up, in the same
	// order.
	Natural() []counters.ID
	Live() []counters.ID
	// Exchange sends payload to the replicas in turn, in the order given,
	// until one answers (its Exchanger's answer is returned): this node's
	// replica is called directly, a peer's over the wire. failed reports
	// that an attempt with some replica failed before the one that
	// answered (the payload may have reached it). It ends early on a
	// refusal (errors.Is(err, ErrRefused): the replica refused the payload)
	// and when ctx ends; when no replica answers the error is a timeout
	// (ErrTimedOut: the outcome is unknown), and with no replica at all it
	// is ErrUnavailable. Each call counts as one exchange in the
	// coordinator's statistics.
	Exchange(ctx context.Context, replicas []counters.ID, payload []byte) (reply []byte, failed bool, err error)
	// Timeout is the budget of one client request (the counter write
	// timeout).
	Timeout() time.Duration
	// WithTimeout derives a context that ends after d on the coordinator's
	// clock (tests run it on virtual time).
	WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc)
	// NewID returns a fresh random id (for a temporary participant), from
	// the coordinator's source of ids.
	NewID() (counters.ID, error)
	// Refused is the error of a request the type refuses: CQL's Invalid,
	// with msg as its message (errors.Is(err, ErrRefused)).
	Refused(msg string) error
	// TimedOut is the error of a request whose outcome is unknown: CQL's
	// WriteTimeout of a counter write at ONE (errors.Is(err, ErrTimedOut)),
	// counted in the coordinator's statistics.
	TimedOut() error
	// Retired counts a temporary participant the type retired in the
	// background (the coordinator's Retirements statistic).
	Retired()
	// Logger is the coordinator's logger.
	Logger() *slog.Logger
}

// The classes of a Coordination's errors, for errors.Is.
var (
	// ErrRefused: the request is invalid for the type or a replica refused
	// the payload; nothing changed.
	ErrRefused = errors.New("coltype: request refused")
	// ErrUnavailable: no replica could be tried; nothing was sent.
	ErrUnavailable = errors.New("coltype: no live replica")
	// ErrTimedOut: no answer in time; the outcome is unknown.
	ErrTimedOut = errors.New("coltype: timed out")
)
