package fbf

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Clock tells the filter the time. It is injected so that tests and
// experiments run in virtual time.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// ManualClock is a virtual clock that moves only when told to. It is safe for
// concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (which may be earlier; the filter ignores time
// going backwards).
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Add moves the clock forward by d and returns the new time.
func (c *ManualClock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Config describes a Filter. Bits, Hashes, Past and Period are required; the
// zero value of every other field selects the documented default.
type Config struct {
	// Bits is m, the number of bits of each constituent Bloom filter.
	Bits uint
	// Hashes is k, the number of hash functions (bit positions) per id.
	Hashes uint
	// Past is N ≥ 1, the initial number of past filters (N+2 filters in all).
	Past int
	// Period is t, the refresh period.
	Period time.Duration

	// Clock supplies the time for New's start time, Tick, AutoAdvance and the
	// background refresher. Default: SystemClock.
	Clock Clock
	// Start is the filter's time zero (the first period starts here).
	// Default: Clock.Now() at New.
	Start time.Time
	// AutoAdvance makes every operation advance the filter to Clock.Now()
	// first, so that no goroutine or caller-driven Advance is needed.
	AutoAdvance bool
	// EstimateFromBits makes EstimatedFPP (and so the adaptation) use the
	// number of set bits of each filter instead of the count of ids inserted.
	EstimateFromBits bool

	// RetryHorizon H is the longest time after which a client may still retry
	// an operation. The filter never forgets an id younger than H: New rejects
	// a configuration whose window (N+1)·t is shorter than H, and the
	// adaptation never makes it shorter. Zero means no constraint.
	RetryHorizon time.Duration

	// TargetFPP enables the adaptation (Algorithm 3) when positive: the
	// filter keeps EstimatedFPP under it by changing N and t. Must be < 1.
	TargetFPP float64
	// UpperFraction of TargetFPP at or above which the filter scales up
	// (default 0.9, the paper's).
	UpperFraction float64
	// LowerFraction of TargetFPP at or below which the filter scales down
	// (default 0.1, the paper's).
	LowerFraction float64
	// AdaptEvery is how often the adaptation is evaluated (default 1s).
	AdaptEvery time.Duration
	// PeriodStep is the additive change of t (default 1s, the paper's).
	PeriodStep time.Duration
	// CapacityFraction sets the capacity guard of the adaptation: the
	// present filter is refreshed early once it holds the number of ids at
	// which FilterFPP reaches CapacityFraction × TargetFPP (default 0.45;
	// negative disables the guard).
	CapacityFraction float64
	// MinPast and MaxPast bound N under adaptation (defaults 1 and
	// max(64, Past)).
	MinPast, MaxPast int
	// MinPeriod and MaxPeriod bound t under adaptation (defaults
	// min(PeriodStep, Period) and max(60s, Period)).
	MinPeriod, MaxPeriod time.Duration
}

// MaxHashes is the largest accepted number of hash functions.
const MaxHashes = 64

// MaxBits is the largest accepted filter size in bits (2^32).
const MaxBits = 1 << 32

// maxPastLimit bounds N so that snapshots and slices stay reasonable.
const maxPastLimit = 1 << 16

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("fbf: invalid config")

func configErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
}

// withDefaults validates c and fills in the defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Bits == 0 || c.Bits > MaxBits {
		return c, configErr("Bits (m) = %d, want 1..%d", c.Bits, uint64(MaxBits))
	}
	if c.Hashes == 0 || c.Hashes > MaxHashes {
		return c, configErr("Hashes (k) = %d, want 1..%d", c.Hashes, MaxHashes)
	}
	if c.Past < 1 || c.Past > maxPastLimit {
		return c, configErr("Past (N) = %d, want 1..%d", c.Past, maxPastLimit)
	}
	if c.Period <= 0 {
		return c, configErr("Period (t) = %v, want > 0", c.Period)
	}
	if c.RetryHorizon < 0 {
		return c, configErr("RetryHorizon = %v, want ≥ 0", c.RetryHorizon)
	}
	if w := window(c.Past, c.Period); w < c.RetryHorizon {
		return c, configErr("window (N+1)·t = (%d+1)·%v = %v is shorter than RetryHorizon %v", c.Past, c.Period, w, c.RetryHorizon)
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Start.IsZero() {
		c.Start = c.Clock.Now()
	}
	if c.TargetFPP < 0 || c.TargetFPP >= 1 || math.IsNaN(c.TargetFPP) {
		return c, configErr("TargetFPP = %v, want 0 (no adaptation) or in (0, 1)", c.TargetFPP)
	}
	if c.UpperFraction == 0 {
		c.UpperFraction = 0.9
	}
	if c.LowerFraction == 0 {
		c.LowerFraction = 0.1
	}
	if !(c.LowerFraction > 0 && c.LowerFraction < c.UpperFraction && c.UpperFraction <= 1) {
		return c, configErr("LowerFraction %v and UpperFraction %v, want 0 < lower < upper ≤ 1", c.LowerFraction, c.UpperFraction)
	}
	if c.CapacityFraction == 0 {
		c.CapacityFraction = 0.45
	}
	if c.CapacityFraction >= 1 || math.IsNaN(c.CapacityFraction) {
		return c, configErr("CapacityFraction = %v, want < 1", c.CapacityFraction)
	}
	if c.AdaptEvery == 0 {
		c.AdaptEvery = time.Second
	}
	if c.AdaptEvery < 0 {
		return c, configErr("AdaptEvery = %v, want > 0", c.AdaptEvery)
	}
	if c.PeriodStep == 0 {
		c.PeriodStep = time.Second
	}
	if c.PeriodStep < 0 {
		return c, configErr("PeriodStep = %v, want > 0", c.PeriodStep)
	}
	if c.MinPast == 0 {
		c.MinPast = 1
	}
	if c.MaxPast == 0 {
		c.MaxPast = max(64, c.Past)
	}
	if c.MinPast < 1 || c.MinPast > c.Past || c.Past > c.MaxPast || c.MaxPast > maxPastLimit {
		return c, configErr("MinPast %d ≤ Past %d ≤ MaxPast %d ≤ %d does not hold", c.MinPast, c.Past, c.MaxPast, maxPastLimit)
	}
	if c.MinPeriod == 0 {
		c.MinPeriod = min(c.PeriodStep, c.Period)
	}
	if c.MaxPeriod == 0 {
		c.MaxPeriod = max(time.Minute, c.Period)
	}
	if c.MinPeriod <= 0 || c.MinPeriod > c.Period || c.Period > c.MaxPeriod {
		return c, configErr("0 < MinPeriod %v ≤ Period %v ≤ MaxPeriod %v does not hold", c.MinPeriod, c.Period, c.MaxPeriod)
	}
	if c.Start.UnixNano() <= 0 || c.Start.Year() > 2200 {
		return c, configErr("Start %v out of range (1970..2200)", c.Start)
	}
	return c, nil
}

// window returns (n+1)·t, saturating instead of overflowing.
func window(n int, t time.Duration) time.Duration {
	if t > 0 && int64(n+1) > math.MaxInt64/int64(t) {
		return math.MaxInt64
	}
	return time.Duration(n+1) * t
}

// Validate reports whether New would accept c, without allocating the
// filter: New's error, or nil.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// MemoryBytes is the memory of the bits of filters constituent filters of
// c.Bits bits each (the steady state holds Past+2 of them; the adaptation
// may grow it to MaxPast+2).
func (c Config) MemoryBytes(filters int) int64 {
	return int64(filters) * int64((uint64(c.Bits)+63)/64) * 8
}
