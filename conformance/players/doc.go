// Package players proves with the players themselves that waisteer's
// steering works with players as they are: hls.js, dash.js and Shaka Player,
// unmodified, in headless Chromium, against live-like HLS and DASH streams
// made with ffmpeg and served by pathway servers on loopback addresses,
// steered by a waisteer server whose decisions come from signed per-hop
// records, or by a pool of health-checked, weighted edges, with or without
// steering by what the players report. The package is its tests
// (players_test.go, pool_test.go, front_test.go, qoe_test.go); README.md
// says what each player was seen to do, and which versions were tested.
package players
