package commitlog

import "time"

// groupWindow decides how long group commit lets appends gather before an
// fsync. It keeps two moving averages, of the log's fsync durations and of
// the time between appends, and the size of the last group. When the last
// group held a single append and fewer than one more append is expected
// during an fsync (the average gap between appends is longer than the
// average fsync), the log is as good as idle: waiting would add to a
// write's latency and gather nobody, so a group is synced at once — a lone
// writer waits for its own fsync only. Otherwise a group gathers for up to
// the window after its first append: windowFsyncs times the average fsync,
// at most Options.GroupWindow (the syncer ends it early, too, once as many
// appends are pending as the last group held: Log.groupTarget). Both
// conditions are needed for idleness: many writers on a slow machine space
// their appends out, but they still fill groups of several.
//
// It holds no lock and reads no clock: the Log guards it with mu and
// passes the times in, so that tests can drive it.
type groupWindow struct {
	cap        time.Duration // Options.GroupWindow
	fsync      time.Duration // moving average of the fsyncs' durations; 0 before the first
	gap        time.Duration // moving average of the time between appends, each at most cap
	lastAppend time.Time     // zero before the first append
	last       int           // appends in the last group synced
}

// avgWeight is the weight of the newest sample in the moving averages, as
// 1/avgWeight.
const avgWeight = 8

// windowFsyncs is the window in average fsyncs.
const windowFsyncs = 4

func ewma(avg, sample time.Duration) time.Duration {
	if avg <= 0 {
		return sample
	}
	return avg + (sample-avg)/avgWeight
}

// window is how long a busy log's group may gather: windowFsyncs average
// fsyncs, at most cap (cap itself before any fsync was timed).
func (w *groupWindow) window() time.Duration {
	if w.fsync <= 0 || windowFsyncs*w.fsync > w.cap {
		return w.cap
	}
	return windowFsyncs * w.fsync
}

// idle reports whether the last group held one append and fewer than one
// more append is expected during an fsync, or nothing is known yet.
func (w *groupWindow) idle() bool {
	return w.fsync <= 0 || w.last <= 1 && (w.gap <= 0 || w.gap > w.fsync)
}

// wait returns how much longer, at now, the syncer should wait before
// syncing a group whose first append arrived at first: zero when the log
// is idle or the window that opened at first has passed.
func (w *groupWindow) wait(first, now time.Time) time.Duration {
	if w.idle() {
		return 0
	}
	return max(0, first.Add(w.window()).Sub(now))
}

// appended records an append at now.
func (w *groupWindow) appended(now time.Time) {
	if !w.lastAppend.IsZero() {
		w.gap = ewma(w.gap, min(max(now.Sub(w.lastAppend), 0), w.cap))
	}
	if now.After(w.lastAppend) {
		w.lastAppend = now
	}
}

// grouped records that a sync took n pending appends (n > 0).
func (w *groupWindow) grouped(n int) { w.last = n }

// synced records the duration of an fsync.
func (w *groupWindow) synced(fsync time.Duration) {
	if fsync > 0 {
		w.fsync = ewma(w.fsync, fsync)
	}
}
