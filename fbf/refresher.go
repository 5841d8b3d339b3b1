package fbf

import (
	"errors"
	"time"
)

// ErrRunning is returned by Start when the background refresher already runs.
var ErrRunning = errors.New("fbf: background refresher already running")

// Start launches a goroutine that advances the filter on the real clock
// (Config.Clock) whenever a refresh or adaptation step falls due. Stop ends
// it. Without Start the filter never runs a goroutine.
func (f *Filter) Start() error {
	f.runMu.Lock()
	defer f.runMu.Unlock()
	if f.stop != nil {
		return ErrRunning
	}
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	f.running.Store(true)
	go f.run(f.stop, f.done)
	return nil
}

// Stop stops the background refresher and waits for it to exit. It is a
// no-op if the refresher is not running.
func (f *Filter) Stop() {
	f.runMu.Lock()
	defer f.runMu.Unlock()
	if f.stop == nil {
		return
	}
	close(f.stop)
	<-f.done
	f.stop, f.done = nil, nil
	f.running.Store(false)
}

func (f *Filter) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-timer.C:
		}
		f.Tick()
		wait := time.Duration(f.deadline.Load() - f.cfg.Clock.Now().UnixNano())
		timer.Reset(max(wait, time.Millisecond))
	}
}
