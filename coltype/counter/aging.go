package counter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/idemkv/idemkv/fbf"
)

// The structures an FBF column may keep its op ids in (option filter).
const (
	// FilterFBF is the paper's Forgetful Bloom Filter (fbf.Filter): N+2
	// Bloom filters, the default.
	FilterFBF = "fbf"
	// FilterAging is the aging cuckoo filter (fbf.AgingFilter): epoch-
	// tagged fingerprints that remember every op id for a long window
	// (option window) in 1.2 to 1.6 times the bits of a Bloom filter.
	FilterAging = "aging"
)

// Bounds and defaults of the options of FilterAging (see docs/fbf.md).
const (
	MinFBFWindow     = time.Second
	MaxFBFWindow     = 24 * time.Hour
	DefaultFBFWindow = 10 * time.Minute // DynamoDB's idempotency window
	MinFBFRate       = 1
	MaxFBFRate       = 10_000_000
	DefaultFBFRate   = 20_000 // fresh op ids per second a column leads or replicates
)

var (
	// agingOnly are the options of FilterAging alone; fbfOnly those of
	// FilterFBF alone.
	agingOnly = []string{"rate", "window"}
	fbfOnly   = []string{"adaptive", "bits", "filters", "hashes", "refresh_period"}

	errAgingOnly = errors.New("applies to 'filter': 'aging' only")
	errFBFOnly   = errors.New("applies to 'filter': 'fbf' (the default) only")
)

// parseAgingOption reads the options filter, window and rate; out handles a
// value out of its bounds (see parseFBF).
func parseAgingOption(o *FBFOptions, k, v string, out func(k, v, limit string, set func()) error) error {
	var err error
	switch k {
	case "filter":
		o.Filter = strings.ToLower(v)
		if o.Filter != FilterFBF && o.Filter != FilterAging {
			err = fmt.Errorf("must be %s or %s", FilterFBF, FilterAging)
		}
	case "window":
		o.Window, err = time.ParseDuration(v)
		switch {
		case err != nil:
		case o.Window <= 0:
			err = fmt.Errorf("must be positive")
		case o.Window < MinFBFWindow:
			err = out(k, v, fmt.Sprintf("must be at least %v", MinFBFWindow), func() { o.Window = MinFBFWindow })
		case o.Window > MaxFBFWindow:
			err = out(k, v, fmt.Sprintf("must be at most %v", MaxFBFWindow), func() { o.Window = MaxFBFWindow })
		}
	case "rate":
		o.Rate, err = strconv.ParseFloat(v, 64)
		switch {
		case err != nil && errors.Is(err, strconv.ErrRange) && o.Rate > 0:
			err = out(k, v, fmt.Sprintf("must be at most %d", MaxFBFRate), func() { o.Rate = MaxFBFRate })
		case err != nil:
		case math.IsNaN(o.Rate) || o.Rate <= 0:
			err = fmt.Errorf("must be positive")
		case o.Rate < MinFBFRate:
			err = out(k, v, fmt.Sprintf("must be at least %d", MinFBFRate), func() { o.Rate = MinFBFRate })
		case o.Rate > MaxFBFRate:
			err = out(k, v, fmt.Sprintf("must be at most %d", MaxFBFRate), func() { o.Rate = MaxFBFRate })
		}
	}
	return err
}

// finishAging checks and completes the options of FilterAging once every
// option is read: no option of FilterFBF, the defaults, a window no
// shorter than the retry horizon and tables within MaxFBFColumnMemory. With
// clamp a value out of its bounds is clamped (see parseFBF).
func finishAging(o FBFOptions, m map[string]string, timeout time.Duration, clamp bool, clamped []string) (FBFOptions, []string, error) {
	for _, k := range fbfOnly {
		if v, ok := m[k]; ok {
			return o, nil, fmt.Errorf("idempotence option %s = %q: %w", k, v, errFBFOnly)
		}
	}
	o.Bits, o.Hashes, o.Filters, o.RefreshPeriod, o.Adaptive = 0, 0, 0, 0, false
	if o.RetryHorizon <= 0 {
		o.RetryHorizon = DefaultFBFRetryAttempts * timeout
	}
	if o.Rate == 0 {
		o.Rate = DefaultFBFRate
	}
	if o.Window == 0 {
		o.Window = max(DefaultFBFWindow, o.RetryHorizon)
	}
	if o.Window < o.RetryHorizon {
		limit := fmt.Sprintf("must be at least retry_horizon (%v)", o.RetryHorizon)
		if !clamp {
			return o, nil, fmt.Errorf("idempotence option window = %q: %w: %s", m["window"], ErrFBFOptionOutOfRange, limit)
		}
		clamped = append(clamped, fmt.Sprintf("window = %q (%s)", m["window"], limit))
		o.Window = o.RetryHorizon
	}
	// The tables grow linearly with the rate: size them for a rate of 1
	// first, so that a rate too high is told (or clamped) without
	// overflowing the sizing.
	one := o
	one.Rate = 1
	s1, err := one.agingSizing()
	if err != nil {
		return o, nil, fmt.Errorf("idempotence: %w", err)
	}
	perRate := s1.PeakIDs * float64(s1.SlotBits) / s1.Load / 8 // bytes per id per second
	s, err := o.agingSizing()
	if err != nil || s.InitialBytes > MaxFBFColumnMemory {
		limit := fmt.Sprintf("rate × (window + window/%d) = %.3g op ids at target_fpp %g take %.0f MiB, more than the %d MiB a column may take",
			fbf.AgingEpochs, o.Rate*s1.PeakIDs, o.TargetFPP, o.Rate*perRate/(1<<20), MaxFBFColumnMemory>>20)
		if !clamp {
			return o, nil, fmt.Errorf("idempotence options rate = %g and window = %v: %w: %s", o.Rate, o.Window, ErrFBFOptionOutOfRange, limit)
		}
		clamped = append(clamped, fmt.Sprintf("rate = %q (%s)", m["rate"], limit))
		o.Rate = max(1, math.Floor(float64(MaxFBFColumnMemory)*0.97/perRate))
		if s, err = o.agingSizing(); err != nil || s.InitialBytes > MaxFBFColumnMemory {
			return o, nil, fmt.Errorf("idempotence: clamping rate: %w", errors.Join(err, ErrFBFOptionOutOfRange))
		}
	}
	return o, clamped, nil
}

// agingSizing is what the column's aging filter allocates (nothing is).
func (o FBFOptions) agingSizing() (fbf.AgingSizing, error) {
	return o.agingConfig(nil).Sizing()
}

// agingConfig is the configuration of the column's aging filter: sized for
// Rate over the window at TargetFPP, growing up to twice that, within
// MaxFBFColumnMemory.
func (o FBFOptions) agingConfig(clock fbf.Clock) fbf.AgingConfig {
	c := fbf.AgingConfig{Window: o.Window, Rate: o.Rate, TargetFPP: o.TargetFPP, RetryHorizon: o.RetryHorizon, Clock: clock}
	if s, err := c.Sizing(); err == nil {
		c.MaxBytes = max(min(s.MaxBytes, MaxFBFColumnMemory), s.InitialBytes)
	}
	return c
}

// maxBytes is the most memory the column's filter may take: its tables
// grown to their bound for FilterAging, N+2 filters at the adaptation's
// largest N for FilterFBF.
func (o FBFOptions) maxBytes() int64 {
	if o.Filter == FilterAging {
		return o.agingConfig(nil).MaxBytes
	}
	c := o.filterConfig(nil)
	return c.MemoryBytes(max(c.Past, c.MaxPast) + 2)
}

// newFilter allocates the column's filter.
func (o FBFOptions) newFilter(clock fbf.Clock) (opFilter, error) {
	if o.Filter == FilterAging {
		f, err := fbf.NewAging(o.agingConfig(clock))
		if err != nil {
			return nil, fmt.Errorf("idempotence: %w", err)
		}
		return agingOps{f}, nil
	}
	f, err := fbf.New(o.filterConfig(clock))
	if err != nil {
		return nil, fmt.Errorf("idempotence: %w", err)
	}
	return bloomOps{f}, nil
}

// opFilter is what an FBF column needs of its set of recent op ids, either
// structure: an atomic test-and-add, a membership test, its estimates, the
// re-insertion of a logged op id at a restart and how long it may remember
// an id.
type opFilter interface {
	TestAndAddHash(h fbf.Hash) (present bool)
	ContainsHash(h fbf.Hash) bool
	EstimatedFPP() float64
	BitsInUse() uint64
	// replay adds the op id of a commit log record of time at.
	replay(h fbf.Hash, at time.Time)
	// maxWindow is how long an id may be remembered at most, never less
	// than the retry horizon: ids older than it need not be restored
	// after a restart, and a retired filter is kept that long.
	maxWindow() time.Duration
}

// bloomOps is the opFilter of FilterFBF.
type bloomOps struct{ *fbf.Filter }

func (b bloomOps) replay(h fbf.Hash, _ time.Time) { b.TestAndAddHash(h) }

// maxWindow is (N+2)·t of the current N and t, and never less than the
// horizon.
func (b bloomOps) maxWindow() time.Duration {
	return max(time.Duration(b.Past()+2)*b.Period(), b.Config().RetryHorizon)
}

// agingOps is the opFilter of FilterAging.
type agingOps struct{ *fbf.AgingFilter }

func (a agingOps) replay(h fbf.Hash, at time.Time) { a.TestAndAddHashAt(h, at) }

// maxWindow is the window and one epoch.
func (a agingOps) maxWindow() time.Duration { return a.MaxWindow() }
