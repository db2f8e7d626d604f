// Package qoewatch is a steerer's steering by what its players report
// (issue 17): the watch over a qoe.Aggregator, fed by the steering
// requests' reports (§4's reader) and by CMCD v2 event reports POSTed to
// the steering route, evaluated every second by the server, its moves
// applied by the steerer (a pool's orders, a room's overlay policy); the
// clients a pool's per-client rule keeps away (Away); and the counts of
// report values that do not count (Unread). It knows no room, pool or
// route: the steerer hands it its pathways, cohort and client. It is a
// part the steerers (roomsteer, poolsteer) are made of, below them, and
// imports none of them, nor the server, which evaluates the watches every
// second and writes their metrics.
package qoewatch
