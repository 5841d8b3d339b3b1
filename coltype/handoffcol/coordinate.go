package handoffcol

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/counters/handoff"
)

// The coordinator side of handoff counters (coltype.Coordinated): what the
// node that receives a client's request does before any replica sees it.

var _ coltype.Coordinated = Type{}

// CoordinateExchange implements coltype.Coordinated: it forwards a client's
// handoff exchange (its encoded state or view, tier ≥ 1, or a
// handoff.Message with its retirement notice, whose servers it sets to the
// key's natural replicas) to one live natural replica of the key: one the
// client holds a token for if any is live (the client drops a token only
// on hearing from its destination, §7.4), else the first live one in ring
// order (so that a client keeps meeting the same tier-0 node while it
// lives; any replica would be safe), trying the next live ones if it
// fails, and returns that replica's view for the client. The replica
// answers only once its merged state is durable. The consistency level is
// not used: an exchange involves one tier-0 node, and a client's
// increments stay in its own state (a token) until a tier-0 node has
// acquired them.
func (Type) CoordinateExchange(ctx context.Context, co coltype.Coordination, payload []byte) ([]byte, error) {
	ctx, cancel := co.WithTimeout(ctx, co.Timeout())
	defer cancel()
	reply, _, err := exchange(ctx, co, payload)
	return reply, err
}

// exchange is CoordinateExchange without its timeout, also reporting
// whether an attempt with some replica failed before the one that answered
// (the failed one may have received the state and opened a slot).
func exchange(ctx context.Context, co coltype.Coordination, payload []byte) (reply []byte, failed bool, err error) {
	msg, bare, err := handoff.DecodeMessage(payload)
	if err != nil {
		return nil, false, co.Refused("handoff exchange: " + err.Error())
	}
	in := msg.State
	if in.Tier() == 0 {
		return nil, false, co.Refused("handoff exchange: a client's state has tier 0 (the replicas' tier)")
	}
	if !bare && len(msg.Notices) > 0 {
		var servers []handoff.ID
		for _, id := range co.Natural() {
			servers = append(servers, handoff.ID(id))
		}
		slices.SortFunc(servers, handoff.ID.Compare)
		for _, h := range msg.Notices {
			h.Servers, h.Seen, h.Created = servers, nil, 0
		}
		if payload, err = msg.MarshalBinary(); err != nil {
			return nil, false, err
		}
	}
	return co.Exchange(ctx, tokenDestinationsFirst(co.Live(), in.TokenDestinations()), payload)
}

// tokenDestinationsFirst orders the live replicas for an exchange: those
// the sender holds tokens for first (it can drop a token only on hearing
// from its destination, §7.4), then ring order.
func tokenDestinationsFirst(live []counters.ID, dsts []handoff.ID) []counters.ID {
	if len(dsts) == 0 {
		return live
	}
	out := make([]counters.ID, 0, len(live))
	rest := make([]counters.ID, 0, len(live))
	for _, id := range live {
		if slices.Contains(dsts, handoff.ID(id)) {
			out = append(out, id)
		} else {
			rest = append(rest, id)
		}
	}
	return append(out, rest...)
}

// writeAttempts bounds the exchanges of CoordinateWrite.
const writeAttempts = 8

// CoordinateWrite implements coltype.Coordinated: it serves a plain
// `UPDATE ... SET c = c + n` of a handoff column (a driver without the
// client helper). The coordinator acts as the tier-1 participant for this
// one request, with a fresh random id, adds n, and exchanges with a replica
// until its increments are handed off (a bounded number of exchanges
// within the counter write timeout). It answers success only once handed
// off, so a success counts n exactly once. On a timeout the increment may
// or may not have been acquired by a replica, and the temporary participant
// retires: with the driver's retry the update is at-least-once between the
// driver and the coordinator (a retry of an update whose answer was lost
// counts again), as a vanilla counter is.
//
// Retiring: a participant whose exchanges all succeeded left nothing
// behind. One that saw an exchange fail may have left a slot at a replica
// (the request arrived, the answer did not), and one that gives up may hold
// a token; it then retires in the background with a retirement notice
// (counters/handoff Notice), which delivers its tokens and drops its slots.
// Increments it had not yet moved into a token are abandoned (never
// counted), as the timeout allows.
func (t Type) CoordinateWrite(ctx context.Context, co coltype.Coordination, delta int64) error {
	if err := t.CheckDelta(delta); err != nil {
		return co.Refused(err.Error())
	}
	if delta == 0 {
		return nil
	}
	id, err := co.NewID()
	if err != nil {
		return err
	}
	p := handoff.NewCounter(handoff.ID(id), 1)
	p.Add(uint64(delta))
	rctx, cancel := co.WithTimeout(ctx, co.Timeout())
	defer cancel()
	// touched: some replica may have received the participant's state;
	// failed: one may have kept a slot for it without the answer arriving.
	var touched, failed bool
	defer func() {
		if touched && (failed || !p.Handed()) {
			retire(context.WithoutCancel(ctx), co, p)
		}
	}()
	for i := 0; i < writeAttempts && !p.Handed(); i++ {
		view, err := p.View(handoff.ID{}, 0).MarshalBinary()
		if err != nil {
			return err
		}
		reply, failedAttempt, err := exchange(rctx, co, view)
		if err != nil {
			if errors.Is(err, coltype.ErrRefused) || errors.Is(err, coltype.ErrUnavailable) {
				return err // refused or not sent
			}
			touched, failed = true, true
			if rctx.Err() != nil {
				return err
			}
			continue
		}
		touched, failed = true, failed || failedAttempt
		r := handoff.NewCounter(handoff.ID{}, 0)
		if err := r.UnmarshalBinary(reply); err != nil {
			return err
		}
		p.Merge(r)
	}
	if !p.Handed() {
		return co.TimedOut()
	}
	return nil
}

// retireAttempts bounds the attempts to deliver a participant's notice.
const retireAttempts = 8

// retire retires a coordinator's temporary participant in the background:
// its retirement notice goes to a live replica (up to retireAttempts
// attempts of half the counter write timeout each), which disseminates it.
// If it never gets there, the participant's leftover slots stay, and a
// token it held is lost with the timeout its request already reported.
func retire(ctx context.Context, co coltype.Coordination, p *handoff.Counter) {
	msg := &handoff.Message{State: p.View(handoff.ID{}, 0), Notices: []*handoff.HeldNotice{{Notice: p.State.Retire()}}}
	b, err := msg.MarshalBinary()
	if err != nil {
		return
	}
	co.Retired()
	go func() {
		// Several attempts, each bounded by a fraction of the budget: a lost
		// message must not use it all.
		ctx, cancel := co.WithTimeout(ctx, retireAttempts*co.Timeout()/2)
		defer cancel()
		pause := 20 * time.Millisecond
		for ctx.Err() == nil {
			actx, acancel := co.WithTimeout(ctx, co.Timeout()/2)
			_, _, err := exchange(actx, co, b)
			acancel()
			if err == nil {
				return
			}
			if errors.Is(err, coltype.ErrRefused) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
		}
		co.Logger().Debug("handoff participant's retirement notice not delivered", "err", ctx.Err())
	}()
}
