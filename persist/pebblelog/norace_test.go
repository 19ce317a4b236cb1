//go:build !race

package pebblelog

const raceEnabled = false
