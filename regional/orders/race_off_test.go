//go:build !race

package orders_test

const raceOn = false
