//go:build !race

package console

// manyIdleSessions is how many idle sessions TestManyIdleSessions holds
// (2,000 build in about three seconds).
const manyIdleSessions = 500
