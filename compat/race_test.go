//go:build race

package compat

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
