//go:build race

package e2e_test

// raceOn says the tests run under the race detector, which makes the
// import test's Go side several times slower.
const raceOn = true
