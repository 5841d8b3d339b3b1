//go:build race

package fbf

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
