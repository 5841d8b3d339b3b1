package commitlog

import "time"

// groupWindow decides how long group commit lets appends gather before an
// fsync. The window is the moving average of the log's fsync durations,
// capped at Options.GroupWindow: waiting about as long as one fsync lets
// the writers that arrive meanwhile share the next one, while adding at
// most one fsync's time to any write. A group whose first append arrives
// a whole window or more after the last sync ended finds the log idle and
// is synced at once, so a lone writer never waits a window. The syncer
// ends a window early, too, once as many appends are pending as the last
// group held (Log.groupTarget).
//
// It holds no lock and reads no clock: the Log guards it with mu and
// passes the times in, so that tests can drive it.
type groupWindow struct {
	cap      time.Duration // Options.GroupWindow
	avg      time.Duration // moving average of the fsyncs' durations; 0 before the first
	lastSync time.Time     // when the last sync ended; zero before the first
}

// fsyncWeight is the weight of the newest fsync in the moving average, as
// 1/fsyncWeight.
const fsyncWeight = 8

// window is how long a group may gather: the average fsync, at most cap
// (cap itself before any fsync was timed).
func (w *groupWindow) window() time.Duration {
	if w.avg <= 0 || w.avg > w.cap {
		return w.cap
	}
	return w.avg
}

// wait returns how much longer, at now, the syncer should wait before
// syncing a group whose first append arrived at first: zero when the log
// was idle (no sync yet, or first came a window or more after the last
// sync ended) or when the window that opened at first has passed.
func (w *groupWindow) wait(first, now time.Time) time.Duration {
	win := w.window()
	if w.lastSync.IsZero() || first.Sub(w.lastSync) >= win {
		return 0
	}
	return max(0, first.Add(win).Sub(now))
}

// synced records a sync that ended at end; fsync is the duration of its
// fsync, or zero when there was nothing to fsync.
func (w *groupWindow) synced(fsync time.Duration, end time.Time) {
	if fsync > 0 {
		if w.avg <= 0 {
			w.avg = fsync
		} else {
			w.avg += (fsync - w.avg) / fsyncWeight
		}
	}
	if end.After(w.lastSync) {
		w.lastSync = end
	}
}
