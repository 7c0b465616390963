//go:build race

package webhost

// manyIdleSessions is how many sessions TestManyIdleSessions makes: fewer
// under the race detector, which multiplies the cost of each.
const manyIdleSessions = 100
