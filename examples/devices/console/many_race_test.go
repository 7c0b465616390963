//go:build race

package console

// manyIdleSessions is smaller under the race detector, which multiplies
// the cost of building each session.
const manyIdleSessions = 200
